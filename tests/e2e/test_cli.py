"""The quire command line against a real database, as a user runs it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fpdf import FPDF

from schema import queue


def make_pdf(path: Path, pages: int = 2) -> Path:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for n in range(pages):
        pdf.add_page()
        pdf.cell(0, 10, f"Invoice INV-{n:04d} Total EUR 1,234.56")
    pdf.output(str(path))
    return path


@pytest.fixture
def quire(db_dsn, tmp_path):
    env = {**os.environ, "QUIRE_DATABASE_URL": db_dsn, "QUIRE_DATA_DIR": str(tmp_path / "data"),
           "QUIRE_CONFIG": str(tmp_path / "quire.toml")}

    def run(*args, check=True):
        proc = subprocess.run([sys.executable, "-m", "app.cli", *args], env=env, capture_output=True,
                              text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
        if check and proc.returncode != 0:
            raise AssertionError(f"quire {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
        return proc

    return run


def test_migrate_is_idempotent_and_db_url_prints_the_dsn(quire, db_dsn):
    assert "up to date" in quire("migrate").stdout
    assert quire("db-url").stdout.strip() == db_dsn


def test_submit_stores_files_and_enqueues_with_priority_and_customer(quire, tmp_path, conn):
    a = make_pdf(tmp_path / "a.pdf", pages=3)
    b = make_pdf(tmp_path / "b.pdf", pages=1)
    quire("migrate")  # configures the default agent: submit only reads configuration
    out = quire("submit", str(a), str(b), "--priority", "7", "--customer", "acme").stdout
    assert out.count("task ") == 2
    rows = conn.execute("SELECT document_name, document_uri, pages, priority, customer, estimated_tokens, "
                        "document_chars, document_sha256, submitted_by FROM tasks ORDER BY id").fetchall()
    assert [(r["document_name"], r["pages"], r["priority"], r["customer"]) for r in rows] == [
        ("a.pdf", 3, 7, "acme"), ("b.pdf", 1, 7, "acme")]
    # The estimate is sized by the PDF's text, counted at submit.
    assert rows[0]["document_chars"] > 0
    assert rows[0]["estimated_tokens"] == queue.estimate_tokens(pages=3, document_chars=rows[0]["document_chars"])
    stored = Path(rows[0]["document_uri"])
    assert stored.is_file() and stored.read_bytes() == a.read_bytes()
    assert str(tmp_path / "data" / "files") in str(stored)
    status = json.loads(quire("status", "--json").stdout)
    assert status["total"] == {"enqueued": 2}
    assert status["agents"] == {"documents": {"enqueued": 2}}


def test_submit_rejects_bad_files_with_clear_messages_and_writes_nothing_for_them(quire, tmp_path, conn):
    good = make_pdf(tmp_path / "good.pdf")
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    text = tmp_path / "notes.pdf"
    text.write_text("just some text, not a PDF")
    damaged = tmp_path / "damaged.pdf"
    damaged.write_bytes(b"%PDF-1.7\n" + os.urandom(300))
    quire("migrate")
    proc = quire("submit", str(good), str(empty), str(text), str(damaged), str(tmp_path / "missing.pdf"),
                 check=False)
    assert proc.returncode == 1
    assert "empty.pdf: the file is empty" in proc.stderr
    assert "notes.pdf: not a PDF" in proc.stderr
    assert "damaged.pdf: the PDF is damaged" in proc.stderr
    assert "missing.pdf: no such file" in proc.stderr
    names = [r["document_name"] for r in conn.execute("SELECT document_name FROM tasks")]
    assert names == ["good.pdf"]
    stored = list((tmp_path / "data" / "files").rglob("*.pdf"))
    assert [p.name for p in stored] == ["good.pdf"]


def test_bad_arguments_exit_non_zero_with_an_error_and_store_nothing(quire, tmp_path, conn):
    pdf = make_pdf(tmp_path / "a.pdf")
    proc = quire("submit", str(pdf), "--priority", "12", check=False)
    assert proc.returncode == 2 and "the priority must be a whole number from 0 to 9" in proc.stderr
    proc = quire("submit", str(pdf), "--agent", "nobody", check=False)
    assert proc.returncode == 2 and "unknown agent 'nobody'" in proc.stderr
    assert conn.execute("SELECT count(*) AS n FROM tasks").fetchone()["n"] == 0
    assert not list((tmp_path / "data").rglob("*.pdf"))


def test_agents_come_from_quire_toml(quire, tmp_path, conn):
    (tmp_path / "quire.toml").write_text(
        '[agents.invoices]\nmax_concurrent_tasks = 4\nmax_tpm = 50000\n'
        '[agents.contracts]\nlease_seconds = 300\n')
    quire("migrate")
    rows = {r["name"]: r for r in conn.execute("SELECT * FROM agents")}
    assert rows["invoices"]["max_concurrent_tasks"] == 4 and rows["invoices"]["max_tpm"] == 50000
    assert rows["contracts"]["lease_seconds"] == 300
    (tmp_path / "quire.toml").write_text('[agents.invoices]\nmax_tpm = -1\n')
    proc = quire("migrate", check=False)
    assert proc.returncode == 2 and "max_tpm" in proc.stderr


def test_processes_with_the_same_data_dir_share_one_embedded_server(tmp_path):
    data_dir = tmp_path / "shared"
    env = {k: v for k, v in os.environ.items() if k != "QUIRE_DATABASE_URL"}
    env.update(QUIRE_DATA_DIR=str(data_dir), QUIRE_CONFIG=str(tmp_path / "none.toml"))
    root = Path(__file__).resolve().parents[2]
    try:
        procs = [subprocess.Popen([sys.executable, "-m", "app.cli", "db-url"], env=env, cwd=root,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
        outs = [p.communicate(timeout=120) for p in procs]
        urls = {out.strip() for out, _ in outs}
        assert all(p.returncode == 0 for p in procs), [err[-2000:] for p, (_, err) in zip(procs, outs) if p.returncode]
        assert len(urls) == 1 and str(data_dir) in urls.pop()
        status = subprocess.run([sys.executable, "-m", "app.cli", "status", "--json"], env=env, cwd=root,
                                capture_output=True, text=True, timeout=120)
        # A read-only command never migrates: it says what to run instead.
        assert status.returncode == 2 and "run `quire migrate` first" in status.stderr, status.stderr
        assert subprocess.run([sys.executable, "-m", "app.cli", "migrate"], env=env, cwd=root,
                              capture_output=True, text=True, timeout=120).returncode == 0
        status = subprocess.run([sys.executable, "-m", "app.cli", "status", "--json"], env=env, cwd=root,
                                capture_output=True, text=True, timeout=120)
        assert status.returncode == 0 and json.loads(status.stdout)["total"] == {}
    finally:
        stop = subprocess.run([sys.executable, "-m", "app.cli", "db-stop"], env=env, cwd=root,
                              capture_output=True, text=True, timeout=60)
    assert stop.stdout.strip() == "stopped"


def test_submit_goes_through_the_upload_service_and_offers_duplicates(quire, tmp_path, conn):
    quire("migrate")  # configures the default agent: submit only reads configuration
    a = make_pdf(tmp_path / "a.pdf", pages=2)
    copy = tmp_path / "copy-of-a.pdf"
    copy.write_bytes(a.read_bytes())

    def created(out: str) -> int:
        return sum(line.startswith("task ") for line in out.splitlines())

    first = quire("submit", str(a), str(copy)).stdout
    assert created(first) == 1 and "duplicate copy-of-a.pdf: already task" in first
    again = quire("submit", str(a)).stdout
    assert "duplicate a.pdf: already task" in again
    assert conn.execute("SELECT count(*) AS n FROM tasks").fetchone()["n"] == 1
    rerun = quire("submit", str(a), "--duplicates", "rerun").stdout
    assert created(rerun) == 1
    rows = conn.execute("SELECT submitted_by, pages FROM tasks ORDER BY id").fetchall()
    assert rows == [{"submitted_by": "cli", "pages": 2}] * 2


def test_read_only_commands_never_apply_the_configuration_of_their_folder(quire, tmp_path, conn):
    (tmp_path / "quire.toml").write_text('[agents.documents]\nprice_input_per_mtok = 3.0\n'
                                         'price_output_per_mtok = 15.0\nmax_tpm = 90000\n')
    quire("migrate")
    before = conn.execute("SELECT * FROM agents ORDER BY name").fetchall()
    assert [(r["name"], float(r["price_input_per_mtok"])) for r in before] == [("documents", 3.0)]
    # Another folder's quire.toml: other prices, limits and another agent.
    (tmp_path / "quire.toml").write_text('[agents.documents]\nprice_input_per_mtok = 0\n'
                                         '[agents.stranger]\nmax_concurrent_tasks = 1\n')
    pdf = make_pdf(tmp_path / "a.pdf")
    for args in (("status",), ("status", "--json"), ("submit", str(pdf)), ("db-url",)):
        quire(*args)
    after = conn.execute("SELECT * FROM agents ORDER BY name").fetchall()
    assert after == before
    assert conn.execute("SELECT count(*) AS n FROM tasks").fetchone()["n"] == 1
    quire("migrate")  # applying it is a deliberate act
    assert {r["name"] for r in conn.execute("SELECT name FROM agents")} == {"documents", "stranger"}


def test_a_read_only_command_in_a_folder_without_a_database_refuses_and_names_the_data_dir(tmp_path):
    data_dir = tmp_path / "elsewhere"
    env = {k: v for k, v in os.environ.items() if k != "QUIRE_DATABASE_URL"}
    env.update(QUIRE_DATA_DIR=str(data_dir), QUIRE_CONFIG=str(tmp_path / "none.toml"))
    root = Path(__file__).resolve().parents[2]
    for args in (("status",), ("pause", "documents"), ("submit", str(make_pdf(tmp_path / "a.pdf")))):
        proc = subprocess.run([sys.executable, "-m", "app.cli", *args], env=env, cwd=root, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert "there is no Quire database in" in proc.stderr and "QUIRE_DATA_DIR" in proc.stderr
    assert not (data_dir / "pg").exists(), "no empty database was made"


def test_start_up_names_each_agent_with_its_executor_model_and_prices(quire, tmp_path):
    (tmp_path / "quire.toml").write_text('[agents.priced]\nmodel = "gpt-test"\nprice_input_per_mtok = 3.0\n'
                                         'price_output_per_mtok = 15.0\n[agents.plain]\n')
    out = quire("migrate").stdout
    assert "agent priced: local executor, model gpt-test, $3 in / $15 out per million tokens" in out
    assert "agent plain: local executor, no model (no LLM calls), no prices: costs shown as unpriced" in out


def test_pause_and_resume_an_agent_from_the_command_line(quire, tmp_path, conn):
    (tmp_path / "quire.toml").write_text('[agents.documents]\n')
    quire("migrate")
    out = quire("pause", "documents", "--until", "2999-01-01T10:00", "--reason", "quota spent").stdout
    assert "agent documents paused until 2999-01-01 10:00 UTC" in out and "quota spent" in out
    row = conn.execute("SELECT paused_until, paused_reason, paused_by FROM agents WHERE name = 'documents'").fetchone()
    assert row["paused_reason"] == "quota spent" and row["paused_by"] == "cli" and row["paused_until"].year == 2999
    assert quire("pause", "documents", "--until", "2001-01-01", check=False).returncode == 2
    assert quire("pause", "nobody", check=False).returncode == 2
    assert "resumed" in quire("resume", "documents").stdout
    assert conn.execute("SELECT paused_at FROM agents WHERE name = 'documents'").fetchone()["paused_at"] is None


def test_submit_takes_e_invoices_as_xml_and_p7m_and_refuses_other_xml(quire, tmp_path, conn):
    from tests.unit.agents import einvoice_samples as einvoices

    (tmp_path / "fattura.xml").write_bytes(einvoices.fatturapa_xml())
    (tmp_path / "fattura.xml.p7m").write_bytes(einvoices.sign_p7m(einvoices.fatturapa_xml(), "der"))
    (tmp_path / "order.xml").write_bytes(einvoices.NOT_AN_INVOICE_XML)
    quire("migrate")
    proc = quire("submit", *(str(tmp_path / n) for n in ("fattura.xml", "fattura.xml.p7m", "order.xml")),
                 check=False)
    assert proc.returncode == 1
    assert "fattura.xml (FatturaPA e-invoice, priority" in proc.stdout
    assert "fattura.xml.p7m (FatturaPA e-invoice, priority" in proc.stdout
    assert "order.xml: an XML document, but not an e-invoice" in proc.stderr
    names = sorted(r["document_name"] for r in conn.execute("SELECT document_name FROM tasks"))
    assert names == ["fattura.xml", "fattura.xml.p7m"]
