"""Structured e-invoices: the exact fields of a CII, UBL or FatturaPA XML, uploaded or embedded.

CII (Factur-X, ZUGFeRD 2, XRechnung CII) and UBL (XRechnung UBL, PEPPOL BIS) are read with the
`factur-x` library's EN 16931 parser; ZUGFeRD 1 (which it does not parse) and Italian FatturaPA
are read here with lxml paths that follow their schemas. Every XML goes through one parser that
resolves no entity, loads no DTD and touches no network; a document that declares a DTD is
refused outright (XXE and "billion laughs" need one). Signed FatturaPA (`.xml.p7m`) is unwrapped
by `agents.signed` before it reaches here.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from lxml import etree

from agents.errors import DocumentError

log = logging.getLogger(__name__)

# What an exact value is worth: the document states it in a typed field, nothing was guessed.
XML_CONFIDENCE = 0.99
# Names producers give the embedded XML (Factur-X, ZUGFeRD 1 and 2, XRechnung), tried first.
EMBEDDED_NAMES = ("factur-x.xml", "zugferd-invoice.xml", "zugferd_invoice.xml", "xrechnung.xml")
MAX_XML_BYTES = 20_000_000

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                          dtd_validation=False, huge_tree=False, remove_comments=True)
_DECLARATION = re.compile(rb"<!(DOCTYPE|ENTITY)", re.IGNORECASE)
_CII_NS = "urn:un:unece:uncefact:data:standard:CrossIndustryInvoice:100"
_UBL_NS = ("urn:oasis:names:specification:ubl:schema:xsd:Invoice-2",
           "urn:oasis:names:specification:ubl:schema:xsd:CreditNote-2")
_ZUGFERD1_NS = "urn:ferd:CrossIndustryDocument:invoice:1p0"
_FATTURAPA_NS = re.compile(r"ivaservizi\.agenziaentrate\.gov\.it/docs/xsd/fatture/v1\.\d")
_FACTURX_PROFILES = {"minimum": "MINIMUM", "basicwl": "BASIC WL", "basic": "BASIC",
                     "extended": "EXTENDED", "extended-ctc-fr": "EXTENDED-CTC-FR"}
_PEPPOL = "urn:fdc:peppol.eu:2017:poacc:billing:3.0"


class NotAnInvoice(DocumentError):
    """An XML document that is not an e-invoice Quire can read (or not safe to read)."""


@dataclass
class EInvoice:
    """The exact fields of one e-invoice and the standard it follows."""

    standard: str                       # Factur-X, ZUGFeRD 1, XRechnung CII, XRechnung UBL, UBL, FatturaPA
    profile: str | None
    fields: dict[str, Any]              # Quire invoice field name -> value (absent: not stated)
    file: str | None = None             # the embedded file's name, for a PDF
    envelope: str | None = None         # "CAdES (p7m)" when it came signed
    tokens: int = 0                     # estimated tokens of the XML read as text by a model
    notes: list[str] = field(default_factory=list)

    def source(self) -> dict[str, Any]:
        """The result's `source` object (docs/CONTRACTS.md)."""
        out: dict[str, Any] = {"kind": "e-invoice XML", "standard": self.standard, "profile": self.profile}
        if self.file:
            out["file"] = self.file
        if self.envelope:
            out["envelope"] = self.envelope
        if self.notes:
            out["notes"] = list(self.notes)
        return out


def looks_like_xml(data: bytes) -> bool:
    """True when the bytes start (after a BOM and blanks) with an XML declaration or element."""
    head = data[:256].lstrip(b"\xef\xbb\xbf").lstrip()
    return head.startswith(b"<")


def parse_xml(data: bytes, name: str = "document") -> etree._Element:
    """The root element, parsed safely; NotAnInvoice for a DTD, an entity or malformed XML."""
    if len(data) > MAX_XML_BYTES:
        raise NotAnInvoice(f"{name}: the XML is over {MAX_XML_BYTES // 1_000_000} MB")
    if _DECLARATION.search(data):
        raise NotAnInvoice(f"{name}: the XML declares a DTD or entities, which Quire refuses to read "
                           "(an e-invoice has none)")
    try:
        root = etree.fromstring(data, parser=_PARSER)
    except etree.XMLSyntaxError as exc:
        raise NotAnInvoice(f"{name}: not well-formed XML ({exc})") from None
    if root.getroottree().docinfo.doctype:
        raise NotAnInvoice(f"{name}: the XML declares a DTD, which Quire refuses to read")
    return root


def read_einvoice(data: bytes, name: str = "document", file: str | None = None) -> EInvoice:
    """The e-invoice in these XML bytes; NotAnInvoice saying why when they hold none."""
    root = parse_xml(data, name)
    namespace = etree.QName(root).namespace or ""
    local = etree.QName(root).localname
    if local == "CrossIndustryInvoice" and namespace == _CII_NS:
        return _read_en16931(root, "cii", file)
    if local in ("Invoice", "CreditNote") and namespace in _UBL_NS:
        return _read_en16931(root, "ubl", file)
    if local == "CrossIndustryDocument" and namespace == _ZUGFERD1_NS:
        return _read_zugferd1(root, file)
    if local == "FatturaElettronica" and _FATTURAPA_NS.search(namespace):
        return _read_fatturapa(root, file)
    shown = f"{{{namespace}}}{local}" if namespace else local
    raise NotAnInvoice(f"{name}: an XML document, but not an e-invoice (its root element is {shown}); "
                       "Quire reads Factur-X, ZUGFeRD, XRechnung (CII or UBL), UBL and FatturaPA invoices")


# -- EN 16931: CII and UBL through the factur-x library ------------------------------------------

def _read_en16931(root: etree._Element, syntax: str, file: str | None) -> EInvoice:
    from facturx.parse_xml import parse_ubl_cii_xml

    flavor = "factur-x" if syntax == "cii" else (
        "ubl-2.1-invoice" if etree.QName(root).localname == "Invoice" else "ubl-2.1-creditnote")
    try:
        # Level "extended" filters nothing out: every field the document states is read.
        data = parse_ubl_cii_xml(root, flavor=flavor, level="extended", float_as="float",
                                 date_as="string", check_xsd=False)
    except Exception as exc:  # the library raises plain Exceptions on documents it cannot read
        raise NotAnInvoice(f"the {syntax.upper()} e-invoice cannot be read ({exc})") from None
    guideline = str(data.get("BT-24") or "")
    standard, profile = _en16931_standard(syntax, guideline)
    seller = data.get("BG-4") or {}
    fields = {
        "issuer": seller.get("name") or seller.get("biz_name"),
        "invoice_number": data.get("BT-1"),
        "issue_date": data.get("BT-2"),
        "due_date": data.get("BT-9"),
        "currency": data.get("BT-5"),
        "subtotal": _amount(data.get("BT-109")),
        "tax": _amount(data.get("BT-110")),
        "total": _amount(data.get("BT-112")),
        "line_items": [_line(item.get("BT-153") or item.get("BT-154"), item.get("BT-129"),
                             _unit_price(item.get("BT-146"), item.get("BT-149")), item.get("BT-131"))
                       for item in data.get("BG-25") or []] or None,
    }
    notes = []
    if data.get("BT-3") and str(data["BT-3"]) != "380":
        notes.append(f"document type code {data['BT-3']}")
    if file and "zugferd" in file.lower() and standard == "Factur-X":
        standard = "ZUGFeRD 2"
    return EInvoice(standard, profile, _present(fields), file=file, notes=notes)


def _en16931_standard(syntax: str, guideline: str) -> tuple[str, str | None]:
    lowered = guideline.lower()
    if "xrechnung" in lowered:
        version = re.search(r"xrechnung_(\d+(?:\.\d+)*)", lowered)
        profile = f"XRechnung {version.group(1)}" if version else "XRechnung"
        return ("XRechnung CII" if syntax == "cii" else "XRechnung UBL"), profile
    standard = "Factur-X" if syntax == "cii" else "UBL"
    if _PEPPOL in guideline:
        return standard, "PEPPOL BIS Billing 3.0"
    if guideline == "urn:cen.eu:en16931:2017":
        return standard, "EN 16931"
    tail = guideline.rsplit(":", 1)[-1].lower()
    return standard, _FACTURX_PROFILES.get(tail, guideline or None)


# -- ZUGFeRD 1 (CrossIndustryDocument, 2013-2014), by paths in its own schema --------------------

def _read_zugferd1(root: etree._Element, file: str | None) -> EInvoice:
    trade = _one(root, "SpecifiedSupplyChainTradeTransaction")
    settlement = _one(trade, "ApplicableSupplyChainTradeSettlement")
    sums = _one(settlement, "SpecifiedTradeSettlementMonetarySummation")
    currency = _text(settlement, "InvoiceCurrencyCode")
    guideline = _text(root, "SpecifiedExchangedDocumentContext/GuidelineSpecifiedDocumentContextParameter/ID")
    items = []
    for line in _all(trade, "IncludedSupplyChainTradeLineItem"):
        price = _one(line, "SpecifiedSupplyChainTradeAgreement/NetPriceProductTradePrice")
        items.append(_line(
            _text(line, "SpecifiedTradeProduct/Name"),
            _text(line, "SpecifiedSupplyChainTradeDelivery/BilledQuantity"),
            _unit_price(_text(price, "ChargeAmount"), _text(price, "BasisQuantity")),
            _text(line, "SpecifiedSupplyChainTradeSettlement/SpecifiedTradeSettlementMonetarySummation/"
                        "LineTotalAmount")))
    fields = {
        "issuer": _text(trade, "ApplicableSupplyChainTradeAgreement/SellerTradeParty/Name"),
        "invoice_number": _text(root, "HeaderExchangedDocument/ID"),
        "issue_date": _cii_date(_text(root, "HeaderExchangedDocument/IssueDateTime/DateTimeString")),
        "due_date": _cii_date(_text(settlement, "SpecifiedTradePaymentTerms/DueDateDateTime/DateTimeString")),
        "currency": currency,
        "subtotal": _amount(_text(sums, "TaxBasisTotalAmount")),
        "tax": _amount(_money_in(sums, "TaxTotalAmount", currency)),
        "total": _amount(_text(sums, "GrandTotalAmount")),
        "line_items": items or None,
    }
    profile = guideline.rsplit(":", 1)[-1].upper() if guideline else None
    return EInvoice("ZUGFeRD 1", profile, _present(fields), file=file)


# -- FatturaPA (Italy, SdI), version 1.2 --------------------------------------------------------

def _read_fatturapa(root: etree._Element, file: str | None) -> EInvoice:
    bodies = _all(root, "FatturaElettronicaBody")
    if not bodies:
        raise NotAnInvoice("the FatturaPA document has no FatturaElettronicaBody")
    body = bodies[0]
    general = _one(body, "DatiGenerali/DatiGeneraliDocumento")
    registry = "FatturaElettronicaHeader/CedentePrestatore/DatiAnagrafici/Anagrafica"
    issuer = _text(root, f"{registry}/Denominazione") or " ".join(
        part for part in (_text(root, f"{registry}/Nome"), _text(root, f"{registry}/Cognome")) if part) or None
    goods = _one(body, "DatiBeniServizi")
    summaries = _all(goods, "DatiRiepilogo")
    subtotal = _sum(_text(s, "ImponibileImporto") for s in summaries)
    tax = _sum(_text(s, "Imposta") for s in summaries)
    total = _amount(_text(general, "ImportoTotaleDocumento"))
    if total is None and subtotal is not None and tax is not None:
        total = round(subtotal + tax, 2)  # the document states no total: its own summary's sum
    due_dates = sorted(d for d in (_text(p, "DataScadenzaPagamento")
                                   for p in _all(body, "DatiPagamento/DettaglioPagamento")) if d)
    items = [_line(_text(li, "Descrizione"), _text(li, "Quantita"), _text(li, "PrezzoUnitario"),
                   _text(li, "PrezzoTotale")) for li in _all(goods, "DettaglioLinee")]
    fields = {
        "issuer": issuer,
        "invoice_number": _text(general, "Numero"),
        "issue_date": _text(general, "Data"),
        "due_date": due_dates[-1] if due_dates else None,
        "currency": _text(general, "Divisa"),
        "subtotal": subtotal, "tax": tax, "total": total,
        "line_items": items or None,
    }
    notes = []
    kind = _text(general, "TipoDocumento")
    if kind and kind != "TD01":
        notes.append(f"TipoDocumento {kind}")
    if len(bodies) > 1:
        notes.append(f"a batch of {len(bodies)} invoices: the first is read")
    return EInvoice("FatturaPA", root.get("versione"), _present(fields), file=file, notes=notes)


# -- small readers -----------------------------------------------------------------------------

def _xpath(path: str) -> str:
    # Namespace-blind steps: ZUGFeRD 1 and FatturaPA mix qualified and unqualified elements.
    return "./" + "/".join(f"*[local-name()='{step}']" for step in path.split("/"))


def _all(node: etree._Element | None, path: str) -> list[etree._Element]:
    return [] if node is None else node.xpath(_xpath(path))


def _one(node: etree._Element | None, path: str) -> etree._Element | None:
    found = _all(node, path)
    return found[0] if found else None


def _text(node: etree._Element | None, path: str) -> str | None:
    found = _one(node, path)
    text = (found.text or "").strip() if found is not None else ""
    return text or None


def _money_in(node: etree._Element | None, path: str, currency: str | None) -> str | None:
    """The amount in the invoice's currency where it is stated in several."""
    found = _all(node, path)
    for element in found:
        if currency and element.get("currencyID") == currency:
            return (element.text or "").strip() or None
    return (found[0].text or "").strip() or None if found else None


def _cii_date(text: str | None) -> str | None:
    if text and re.fullmatch(r"\d{8}", text):
        return f"{text[:4]}-{text[4:6]}-{text[6:]}"
    return text


def _amount(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        return round(float(value), 2)
    except (TypeError, ValueError):
        return None


def _number(value: Any) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _sum(values) -> float | None:
    numbers = [n for n in (_number(v) for v in values) if n is not None]
    return round(sum(numbers), 2) if numbers else None


def _unit_price(price: Any, basis: Any) -> float | None:
    price, basis = _number(price), _number(basis)
    if price is None:
        return None
    return round(price / basis, 6) if basis not in (None, 0.0) else price


def _line(description: Any, quantity: Any, unit_price: Any, amount: Any) -> dict[str, Any]:
    return {"description": str(description).strip() if description else None,
            "quantity": _number(quantity), "unit_price": _number(unit_price), "amount": _amount(amount)}


def _present(fields: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value not in (None, "", [])}


def embedded_einvoice(pdf: Any, name: str) -> EInvoice | None:
    """The e-invoice XML a PDF/A-3 carries as an attachment (Factur-X, ZUGFeRD, XRechnung), if any."""
    import pypdfium2 as pdfium

    attachments = []
    for index in range(pdf.count_attachments()):
        attachment = pdf.get_attachment(index)
        file = attachment.get_name() or ""
        if file.lower().endswith(".xml"):
            attachments.append((file.lower() not in EMBEDDED_NAMES, file, attachment))
    for _, file, attachment in sorted(attachments, key=lambda a: (a[0], a[1])):
        try:
            return read_einvoice(bytes(attachment.get_data()), f"{name}:{file}", file=file)
        except (NotAnInvoice, pdfium.PdfiumError) as exc:
            log.info("attachment %s is not an e-invoice: %s", file, exc)
    return None
