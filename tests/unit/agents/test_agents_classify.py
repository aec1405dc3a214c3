"""Keyword classification across types and languages."""

import pytest

from agents.classify import classify
from agents.pdf import parse_pdf
from tests.unit.agents import agents_samples as samples


@pytest.mark.parametrize(
    ("name", "expected"),
    [("invoice_it", "invoice"), ("invoice_en", "invoice"), ("invoice_de", "invoice"),
     ("contract_en", "contract"), ("contract_it", "contract"), ("contract_fr", "contract"),
     ("financial_en", "financial_statement"), ("financial_it", "financial_statement")],
)
def test_generated_documents(name: str, expected: str) -> None:
    doc = parse_pdf(getattr(samples, name)()[0], "x.pdf")
    result = classify(doc.text)
    assert result.document_type == expected
    assert result.confidence >= 0.8
    assert result.scores[expected] == max(result.scores.values())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("FACTURE n° 12 — Total TTC 120,00 € — TVA 20 % — échéance 30 jours", "invoice"),
        ("RECHNUNG Rechnungsnummer 77, Nettobetrag 100 €, MwSt 19 %, zahlbar bis 1.4.", "invoice"),
        ("Contratto di locazione tra le parti. Premesso che il locatore... Foro competente.", "contract"),
        ("Vertrag zwischen den Vertragsparteien. Laufzeit, Kündigung, Gerichtsstand.", "contract"),
        ("Bilan au 31 décembre. Compte de résultat. Capitaux propres. Total actif.", "financial_statement"),
        ("Bilanz und Gewinn- und Verlustrechnung; Bilanzsumme; Eigenkapital.", "financial_statement"),
    ],
)
def test_short_texts_in_other_languages(text: str, expected: str) -> None:
    assert classify(text).document_type == expected


def test_unrelated_text_is_other_with_high_confidence() -> None:
    result = classify("Dear team, the garden party is on Saturday. Bring snacks.")
    assert result.document_type == "other"
    assert result.confidence > 0.8


def test_accents_do_not_matter() -> None:
    assert classify("Echeance. Numero de facture 3. Total TTC. Net a payer.").document_type == "invoice"
