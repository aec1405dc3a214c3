"""Classify a document as invoice, contract, financial statement or other.

Weighted keywords in en, it, fr, de, nl, es and pt, plus structural cues that survive an
unknown language or wording: a totals block, tax lines, an invoice-number label, a due date.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agents.layout import fold

DOCUMENT_TYPES = ("invoice", "contract", "financial_statement", "other")

# Accent-folded phrases with weights: strong words name the document type itself, weak ones
# are typical vocabulary that other types also use now and then.
_KEYWORDS: dict[str, dict[str, float]] = {
    "invoice": {
        # en
        "invoice": 3, "tax invoice": 3, "invoice number": 3, "invoice no": 3, "bill to": 2,
        "amount due": 2, "balance due": 2, "due date": 1, "subtotal": 1.5, "vat": 1,
        "unit price": 1.5, "qty": 1, "payment terms": 1,
        # it
        "fattura": 3, "fattura n": 3, "numero fattura": 3, "imponibile": 2, "iva": 1,
        "partita iva": 0.5, "scadenza": 1, "prezzo unitario": 1.5, "totale fattura": 3,
        "totale documento": 2, "quantita": 1, "cliente": 0.5,
        # fr
        "facture": 3, "numero de facture": 3, "facture n": 3, "total ttc": 2.5, "total ht": 2,
        "montant ht": 2, "tva": 1, "echeance": 1, "prix unitaire": 1.5, "net a payer": 2.5,
        "quantite": 1,
        # de
        "rechnung": 3, "rechnungsnummer": 3, "rechnungsdatum": 3, "mwst": 1.5, "ust": 1,
        "nettobetrag": 2, "gesamtbetrag": 1.5, "zahlbar bis": 2, "einzelpreis": 1.5,
        "menge": 1, "rechnungsbetrag": 3,
        # en variants: India (GST), US (sales tax), UK (VAT), receipts
        "gst": 1.5, "gstin": 2, "cgst": 2, "sgst": 2, "igst": 2, "hsn": 1.5, "sac": 0.5,
        "sales tax": 2, "vat invoice": 3, "vat registration": 1, "receipt": 2,
        "payment receipt": 3, "invoice date": 3, "grand total": 2, "total due": 2,
        "bill": 1, "billing": 1, "sold by": 2, "amount paid": 1.5, "order id": 1,
        "billing period": 2, "invoice summary": 3, "total amount due": 2.5,
        # nl
        "factuur": 3, "factuurnummer": 3, "factuurdatum": 3, "btw": 1.5, "vervaldatum": 2,
        "te betalen": 2, "totaal": 1, "bedrag": 1, "omschrijving": 1, "aantal": 0.5,
        "excl. btw": 2, "incl. btw": 2, "btw-nummer": 1, "kvk": 1, "debiteurennummer": 2,
        "klantnummer": 1, "betalingstermijn": 2,
        # es
        "factura": 3, "numero de factura": 3, "fecha de factura": 3, "base imponible": 2.5,
        "fecha de vencimiento": 2, "total a pagar": 2.5, "importe": 1, "nif": 1, "cif": 1,
        "precio unitario": 1.5, "cantidad": 0.5, "forma de pago": 1.5, "recibo": 2,
        # pt
        "fatura": 3, "nota fiscal": 3, "numero da fatura": 3, "data de emissao": 2,
        "data de vencimento": 2, "valor total": 1.5, "cnpj": 1.5,
        "preco unitario": 1.5, "quantidade": 0.5, "impostos": 1, "fatura-recibo": 3,
    },
    "contract": {
        # en
        "agreement": 2.5, "contract": 2, "by and between": 3, "hereinafter": 2.5,
        "whereas": 2.5, "the parties": 2, "governing law": 2.5, "termination": 1.5,
        "in witness whereof": 3, "shall": 0.5, "term of this agreement": 2.5, "clause": 1,
        "confidentiality": 1, "obligations": 1,
        # it
        "contratto": 3, "le parti": 2, "premesso che": 3, "si conviene": 2.5, "durata": 1,
        "legge applicabile": 2.5, "foro competente": 2.5, "recesso": 1.5, "articolo": 1,
        "denominato": 1.5, "di seguito": 1.5, "sottoscritto": 1,
        # fr
        "contrat": 3, "les parties": 2, "ci-apres": 2.5, "entre les soussignes": 3,
        "duree": 1, "droit applicable": 2.5, "resiliation": 1.5, "il a ete convenu": 2.5,
        "tribunaux competents": 2, "fait a": 1,
        # de
        "vertrag": 3, "vertragsparteien": 3, "zwischen": 1, "nachfolgend": 2, "laufzeit": 1.5,
        "kundigung": 1.5, "anwendbares recht": 2.5, "gerichtsstand": 2.5, "vereinbarung": 2,
        "paragraph": 0.5, "unterzeichnet": 1,
        # nl, es, pt
        "overeenkomst": 3, "partijen": 2, "looptijd": 1.5, "opzegging": 1.5,
        "toepasselijk recht": 2.5, "contrato": 3, "las partes": 2, "clausula": 1,
        "ley aplicable": 2.5, "as partes": 2, "foro": 1, "vigencia": 1,
    },
    "financial_statement": {
        # en
        "balance sheet": 3, "income statement": 3, "statement of financial position": 3,
        "profit and loss": 3, "cash flow statement": 3, "total assets": 2.5,
        "total liabilities": 2.5, "net income": 2, "revenue": 1, "shareholders' equity": 2,
        "fiscal year": 1, "annual report": 2, "operating income": 1.5, "equity": 1,
        # it
        "stato patrimoniale": 3, "conto economico": 3, "bilancio": 2.5, "totale attivo": 2.5,
        "patrimonio netto": 2, "utile netto": 2, "ricavi": 1, "esercizio": 1, "rendiconto": 2,
        "utile d'esercizio": 2, "passivita": 1,
        # fr
        "bilan": 2.5, "compte de resultat": 3, "chiffre d'affaires": 1.5, "resultat net": 2,
        "total actif": 2.5, "capitaux propres": 2, "exercice": 1, "etats financiers": 3,
        # de
        "bilanz": 3, "gewinn- und verlustrechnung": 3, "umsatzerlose": 1.5,
        "jahresuberschuss": 2, "bilanzsumme": 2.5, "summe aktiva": 2.5, "eigenkapital": 2,
        "geschaftsjahr": 1, "jahresabschluss": 3,
        # nl, es, pt
        "balans": 2.5, "winst-en-verliesrekening": 3, "jaarrekening": 3, "eigen vermogen": 2,
        "balance general": 3, "cuenta de perdidas y ganancias": 3, "patrimonio neto": 2,
        "balanco patrimonial": 3, "demonstracao do resultado": 3, "patrimonio liquido": 2,
    },
}
_PATTERNS = {
    doc_type: [(re.compile(rf"(?<!\w){re.escape(k)}(?!\w)"), w) for k, w in words.items()]
    for doc_type, words in _KEYWORDS.items()
}
# Structural cues of an invoice in any wording: an amount on a totals or tax line, a label
# of a document number, a due date. Each counts once, however often it appears.
_TOTAL_WORDS = (r"total|totale|totaal|gesamt|summe|montant|importe|valor|amount due|balance due|"
                r"te betalen|a pagar|a payer|zu zahlen|da pagare|grand total|net a payer")
_TAX_WORDS = r"vat|tva|iva|mwst|ust|btw|gst|cgst|sgst|igst|sales tax|tax|imposta|impuesto|imposto"
_AMOUNT = r"[-(]?(?:[$€£₹]|rs\.?|inr|eur|usd|gbp|chf|brl)?\s?\d[\d.,' ]*[.,]\d{2}\b"
_STRUCTURE = [
    (re.compile(rf"(?<!\w)(?:{_TOTAL_WORDS})\b[^\n\d]{{0,40}}{_AMOUNT}"), 2.0),
    (re.compile(rf"(?<!\w)(?:{_TAX_WORDS})\b[^\n]{{0,30}}(?:\d{{1,2}}(?:[.,]\d+)?\s?%|{_AMOUNT})"),
     1.5),
    (re.compile(r"(?<!\w)(?:invoice|inv|fattura|facture|rechnung|factuur|factura|fatura|faktura|bill|"
                r"receipt|recibo|nota)\s*(?:no|nr|n|num|number|numero|nummer|#|id)?\.?\s*"
                r"[:°º#]?\s*[a-z]{0,6}[-/_]?\d[\w/-]*"), 2.0),
    (re.compile(r"(?<!\w)(?:due date|payment due|vervaldatum|scadenza|echeance|fallig|"
                r"fecha de vencimiento|data de vencimento|pay by|zahlbar bis)\b"), 1.0),
]
# Documents state their type near the top; later pages mostly repeat vocabulary.
_HEAD_CHARS = 6000
# Below this score the evidence is too thin to call it any of the known types.
_MIN_SCORE = 4.0


@dataclass(frozen=True)
class Classification:
    """The chosen type, its confidence and every type's score."""

    document_type: str
    confidence: float
    scores: dict[str, float]


def classify(text: str) -> Classification:
    """Score the keywords of each type (occurrences capped) and pick the best-scoring type."""
    head = fold(text[:_HEAD_CHARS])
    rest = fold(text[_HEAD_CHARS:_HEAD_CHARS * 5])
    scores: dict[str, float] = {}
    for doc_type, patterns in _PATTERNS.items():
        score = 0.0
        for pattern, weight in patterns:
            # Capping repeats keeps one word said fifty times from outvoting the rest.
            hits = min(len(pattern.findall(head)), 3) + 0.5 * min(len(pattern.findall(rest)), 2)
            score += weight * hits
        scores[doc_type] = round(score, 2)
    # Contracts and statements quote amounts too: the cues count only for a document that
    # already shows some invoice vocabulary, or shows at least three of the four cues.
    cues = [weight for pattern, weight in _STRUCTURE if pattern.search(head)]
    if scores["invoice"] >= 1 or len(cues) >= 3:
        scores["invoice"] = round(scores["invoice"] + sum(cues), 2)
    best = max(scores, key=scores.__getitem__)
    total = sum(scores.values())
    if scores[best] < _MIN_SCORE:
        # The less any type's vocabulary shows, the surer "other" is.
        return Classification("other", round(1.0 - scores[best] / (2 * _MIN_SCORE), 3), scores)
    share = scores[best] / total
    strength = min(1.0, scores[best] / (3 * _MIN_SCORE))
    confidence = round(max(0.3, min(0.99, share * (0.6 + 0.4 * strength) + 0.1)), 3)
    return Classification(best, confidence, scores)
