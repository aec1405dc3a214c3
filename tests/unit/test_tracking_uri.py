"""The MLflow URL beside the queue's database, written out without SQLAlchemy: the same text
SQLAlchemy's URL.render_as_string gives (MLflow parses it back with SQLAlchemy)."""

import sys

import pytest

from worker.tracking import tracking_uri_beside


@pytest.mark.parametrize("dsn, expected", [
    ("postgresql://postgres@127.0.0.1:5432/x", "postgresql+psycopg://postgres@127.0.0.1:5432/quire_mlflow"),
    ("host=/tmp/sock port=5433 user=u dbname=d", "postgresql+psycopg://u@:5433/quire_mlflow?host=%2Ftmp%2Fsock"),
    ("postgresql://us%40er:p%3Aa%2Fss%20w+x@h.example.com/db?sslmode=require&application_name=a%20b"
     "&connect_timeout=5",
     "postgresql+psycopg://us%40er:p%3Aa%2Fss w+x@h.example.com/quire_mlflow"
     "?application_name=a+b&connect_timeout=5&sslmode=require"),
    ("dbname=x", "postgresql+psycopg:///quire_mlflow"),
    ("postgresql://u:@[::1]/x", "postgresql+psycopg://u@[::1]/quire_mlflow"),
    ("host=::1 user=a password='' dbname=q", "postgresql+psycopg://a:@[::1]/quire_mlflow"),
    ("host=h user='a b' password='x@y:z'", "postgresql+psycopg://a b:x%40y%3Az@h/quire_mlflow"),
])
def test_tracking_uri_is_sqlalchemys_rendering(dsn, expected):
    assert tracking_uri_beside(dsn) == expected
    from sqlalchemy.engine import make_url

    parsed = make_url(expected)  # and SQLAlchemy reads back the server and the database
    assert parsed.database == "quire_mlflow" and parsed.drivername == "postgresql+psycopg"


def test_tracking_uri_does_not_load_sqlalchemy():
    import subprocess

    out = subprocess.run([sys.executable, "-c", "import sys, worker.tracking as t; "
                          "t.tracking_uri_beside('postgresql://u@h/d'); print('sqlalchemy' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
