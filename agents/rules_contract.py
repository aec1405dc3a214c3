"""Offline rules for contracts: parties, effective date, term, governing law, value, currency."""

from __future__ import annotations

import re

from agents.amounts import currency_code, dominant_currency, money_values
from agents.dates import find_dates
from agents.fields import FieldValue, empty_fields
from agents.layout import DocView, fold
from agents.prose import (
    LEGAL_FORM,
    after_phrases,
    amount_at,
    company_name,
    cut_name,
    date_at,
    legal_names,
    phrases,
    usual_case,
)

# Contracts say what matters in the first pages; later pages are mostly clauses and annexes.
_HEAD_PAGES = 3

_ENUMERATION = re.compile(r"\(\s*(\d|[a-d])\s*\)\s+")
_DEFINED_EFFECTIVE = re.compile(
    r"\(\s*(?:the|la|il|le|l'|die|der|das|nachfolgend|di seguito|ci-apres)?\s*[\"“«„']?\s*"
    r"(?:effective date|commencement date|data di efficacia|data di decorrenza|"
    r"date d'effet|date d'entree en vigueur|stichtag|wirksamkeitsdatum|inkrafttreten)"
)
_CAPS = re.compile(
    r"liabil|exceed|insurance|indemnit|penalt|plafonn|assurance|responsabilit|penalit|"
    r"haftung|versicher|vertragsstrafe|begrenzt|massimal|assicura|sinistre|schadensfall"
)
_SIGNATURE_PREFIX = re.compile(
    r"^(?:signed for and on behalf of|signed by|for and on behalf of|on behalf of|for|per|"
    r"pour|fur|für|im auftrag von)\s+", re.IGNORECASE)
_BETWEEN = re.compile(r"(?<!\w)(?:by and between|between|tra|fra|entre|zwischen)(?=[\s:])\s*:?\s*")
_CONJUNCTION = re.compile(r"(?<!\w)(?:and|e|et|und)\s+")
_PARTY_LABEL = re.compile(
    r"^(?:party [a-d12]|first party|second party|supplier|provider|service provider|client|"
    r"customer|contractor|licensor|licensee|lessor|lessee|landlord|tenant|buyer|seller|"
    r"employer|employee|fornitore|cliente|committente|appaltatore|locatore|conduttore|"
    r"parte [a-d12]|prima parte|seconda parte|prestataire|bailleur|preneur|vendeur|acheteur|"
    r"auftraggeber|auftragnehmer|vermieter|mieter|kaufer|verkaufer|lizenzgeber|lizenznehmer)"
    r"\s*:\s*(.*)$"
)
_EFFECTIVE = phrases(
    "effective date, effective as of, effective from, effective on, commencement date, "
    "start date, with effect from, shall commence on, shall become effective on, "
    "data di decorrenza, decorrenza, con decorrenza dal, con effetto dal, a decorrere dal, "
    "data di efficacia, data di inizio, efficace dal, date d'entree en vigueur, "
    "entre en vigueur le, prend effet le, prendra effet le, a compter du, date d'effet, "
    "date de prise d'effet, inkrafttreten, gultig ab, wirksam ab, beginnt am, "
    "mit wirkung zum, mit wirkung vom, vertragsbeginn, take effect on, takes effect on, "
    "commence on, commences on, commencing on, decorrono dal, decorre dal, "
    "entra in vigore il, entrera in vigore il, ha efficacia dal, courent a compter du, "
    "entre en vigueur le, tritt am, in kraft ab", 1.0, 40)
_EFFECTIVE += phrases(
    "dated as of, entered into as of, made as of, made on, entered into on, dated, "
    "stipulato il, sottoscritto il, concluso il, fait a, conclu le, geschlossen am, "
    "abgeschlossen am", 0.7, 40)
_VALUE = phrases(
    "total contract value, contract value, total value, total consideration, contract price, "
    "total value of this agreement, prix global et forfaitaire, prix global, prix forfaitaire, "
    "valore totale del contratto, valore totale, gesamtvergutung fur die vertragslaufzeit, "
    "total price, total fees, total fee, aggregate amount, corrispettivo complessivo, "
    "corrispettivo totale, valore del contratto, valore complessivo, importo complessivo, "
    "prezzo complessivo, prix total, montant total, valeur du contrat, gesamtvergutung, "
    "auftragswert, vertragswert, gesamtpreis, gesamtbetrag", 1.0, 120)
_VALUE += phrases(
    "consideration, fees, fee, price, corrispettivo, compenso, prezzo, remuneration, prix, "
    "honoraires, vergutung, preis, pauschale", 0.75, 80)

_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "eighteen": 18, "twenty-four": 24,
    "thirty-six": 36, "forty-eight": 48, "sixty": 60,
    "uno": 1, "un": 1, "una": 1, "due": 2, "tre": 3, "quattro": 4, "cinque": 5, "sei": 6,
    "sette": 7, "otto": 8, "nove": 9, "dieci": 10, "undici": 11, "dodici": 12,
    "diciotto": 18, "ventiquattro": 24, "trentasei": 36, "quarantotto": 48, "sessanta": 60,
    "une": 1, "deux": 2, "trois": 3, "quatre": 4, "cinq": 5, "sept": 7, "huit": 8,
    "neuf": 9, "dix": 10, "onze": 11, "douze": 12, "dix-huit": 18, "vingt-quatre": 24,
    "trente-six": 36, "quarante-huit": 48, "soixante": 60,
    "ein": 1, "eine": 1, "einen": 1, "einem": 1, "zwei": 2, "drei": 3, "vier": 4, "funf": 5,
    "sechs": 6, "sieben": 7, "acht": 8, "neun": 9, "zehn": 10, "elf": 11, "zwolf": 12,
    "achtzehn": 18, "vierundzwanzig": 24, "sechsunddreissig": 36, "sechsunddreißig": 36,
    "achtundvierzig": 48,
    "sechzig": 60,
}
_NUM = "|".join(sorted((re.escape(w) for w in _NUMBER_WORDS), key=len, reverse=True))
_YEAR_UNITS = {"year", "years", "anni", "anno", "ans", "an", "annees", "annee", "jahre", "jahren",
               "jahr"}
_DURATION = re.compile(
    rf"(?<![\w-])(\d{{1,3}}|{_NUM})\s*(?:\(\s*\d{{1,3}}\s*\)\s*)?[-\s]?"
    r"(months?|years?|mesi|mese|anni|anno|mois|annees|annee|ans|an|monaten|monate|monat|"
    r"jahren|jahre|jahr)(?!\w)"
)
_TERM_WORDS = re.compile(
    r"(?:(?<!\w)(?:term|period|duration|durata|periodo|duree|dauer|valid for|"
    r"initial term|validita|validite)|laufzeit)(?!\w)"
)
_NOTICE = re.compile(r"notice|preavviso|preavis|kundigungsfrist|kundigung|disdetta|resiliation")
_COUNTRIES = {
    "ital": "Italy", "franc": "France", "franz": "France", "deutsch": "Germany",
    "tedesc": "Germany", "allemand": "Germany", "german": "Germany", "svizzer": "Switzerland",
    "suisse": "Switzerland", "schweiz": "Switzerland", "swiss": "Switzerland",
    "austria": "Austria", "autrich": "Austria", "osterreich": "Austria",
    "ingles": "England and Wales", "anglais": "England and Wales", "englisch": "England and Wales",
    "english": "England and Wales", "spagnol": "Spain", "espagnol": "Spain", "spanisch": "Spain",
    "spanish": "Spain", "belg": "Belgium", "lussemburg": "Luxembourg", "luxembourg": "Luxembourg",
    "olandes": "Netherlands", "neerland": "Netherlands", "niederland": "Netherlands",
    "dutch": "Netherlands", "bundesrepublik deutschland": "Germany",
    "federal republic of germany": "Germany", "republic of italy": "Italy",
    "italian republic": "Italy", "repubblica italiana": "Italy", "italy": "Italy",
    "france": "France", "germany": "Germany", "switzerland": "Switzerland",
    "england": "England and Wales",
}
_ARTICLES = {"das", "der", "die", "dem", "the", "le", "la", "il", "lo", "les", "this"}
_LAW_CLAUSE = re.compile(
    r"governing law|governed by|legge applicabile|diritto applicabile|disciplinat|regolat|"
    r"droit applicable|loi applicable|regi par|soumis au|anwendbares recht|unterlieg|untersteh")
_LAW_PATTERNS = [
    re.compile(r"govern(?:ed|s)? by(?: and (?:construed|interpreted) in accordance with)?"
               r"(?: the)? laws? of(?: the)? (.{2,60}?)"
               r"(?=[.,;(]| and (?:any|construed|interpreted)|"
               r" without| excluding|$)"),
    re.compile(r"governing law\s*[:.-]?\s*(?:this agreement[^.]{0,40}?laws? of|the laws? of)?"
               r"(?: the)? (.{2,50}?)(?=[.,;(]|$)"),
    re.compile(r"in accordance with(?: the)? laws? of(?: the)? (.{2,60}?)(?=[.,;(]|$)"),
    re.compile(r"govern(?:ed|s)? by(?: the)? (\w+) laws?"),
    re.compile(r"(?:subject to|construed in accordance with)(?: the)? (\w+) laws?"),
    re.compile(r"(?:regolat|disciplinat|sottopost|soggett|rett)[oa]\s+(?:dall[ae']|all[ae'])\s*"
               r"(?:legge|leggi|legislazione|diritto)\s+(?:della\s+repubblica\s+)?(\w+)"),
    re.compile(r"(?:legge applicabile|diritto applicabile)\s*[:.-]?[^.]{0,40}?legge\s+(\w+)"),
    re.compile(r"(?:regie?|soumise?|gouverne)\s+(?:par|au)\s+(?:le\s+)?(?:droit|loi)\s+(\w+)"),
    re.compile(r"(?:droit applicable|loi applicable)\s*[:.-]?[^.]{0,40}?(?:droit|loi)\s+(\w+)"),
    re.compile(r"(?:unterlieg(?:t|en)|untersteh(?:t|en))\s+(?:dem\s+|ausschliesslich\s+dem\s+)?"
               r"(\w+)\s+recht"),
    re.compile(r"es gilt\s+(?:ausschliesslich\s+)?(?:das\s+)?(\w+)\s+recht"),
    re.compile(r"anwendbares recht\s*[:.-]?[^.]{0,40}?(\w+)\s+recht"),
    re.compile(r"recht der (bundesrepublik deutschland|schweiz|republik osterreich)"),
]


def extract_contract(view: DocView) -> dict[str, FieldValue]:
    """All contract fields of docs/CONTRACTS.md, each with a confidence."""
    fields = empty_fields("contract")
    head = view.flat(_HEAD_PAGES)
    text = view.flat()
    fields["parties"] = _parties(view, head)
    if fields["parties"].value:
        fields["parties"].value = [usual_case(p, text) for p in fields["parties"].value]
    fields["effective_date"] = _effective_date(head, view.dayfirst)
    fields["term_months"] = _term(text)
    fields["governing_law"] = _governing_law(text)
    value = after_phrases(text, _VALUE, _contract_amount, window=160)
    if value:
        fields["total_value"] = FieldValue(value[0], round(0.85 * value[1], 3))
        pos = value[2]
        code = currency_code(text[pos:pos + 200])
        if code:
            fields["currency"] = FieldValue(code, 0.85)
    if fields["currency"].value is None:
        code, share = dominant_currency(view.text)
        if code:
            fields["currency"] = FieldValue(code, round(0.4 + 0.4 * share, 3))
    if fields["total_value"].value is None:
        candidates = [a.value for a in money_values(text)
                      if a.currency and not _CAPS.search(fold(text[max(0, a.start - 150):a.start]))]
        if candidates:
            fields["total_value"] = FieldValue(max(candidates), 0.3)
    return fields


def _contract_amount(text: str) -> tuple[float | None, int] | None:
    # Liability caps, insurance cover and penalties are amounts too, but not the contract's value.
    found = amount_at(text)
    if found is None or _CAPS.search(fold(text[:found[1]])):
        return None
    return found


def _effective_date(head: str, dayfirst: bool) -> FieldValue:
    folded = fold(head)
    # "... on 1 March 2024 (the "Effective Date")": the date just before the defined term.
    for m in _DEFINED_EFFECTIVE.finditer(folded):
        before = find_dates(head[max(0, m.start() - 80):m.start()], dayfirst)
        if before:
            return FieldValue(before[-1].iso, 0.92)
    found = after_phrases(head, _EFFECTIVE, date_at(dayfirst))
    if found:
        return FieldValue(found[0], round(0.9 * found[1], 3))
    dates = find_dates(head, dayfirst)
    return FieldValue(dates[0].iso, 0.4) if dates else FieldValue()


def _parties(view: DocView, head: str) -> FieldValue:
    folded = fold(head)
    for m in _BETWEEN.finditer(folded[:8000]):
        listed = _enumerated_parties(head[m.end():m.end() + 3000])
        if len(listed) >= 2:
            return FieldValue(listed, 0.9)
        first = cut_name(head[m.end():m.end() + 300])
        if not first:
            continue
        second = _second_party(head, folded, m.end() + len(first), first)
        if second:
            both_legal = all(LEGAL_FORM.search(n) for n in (first, second))
            return FieldValue([first, second], 0.9 if both_legal else 0.8)
    labelled = []
    for line in view.lines[:80]:
        for cell in line.cells:
            lm = _PARTY_LABEL.match(fold(cell.text))
            if lm and lm.group(1).strip():
                name = cut_name(cell.text[lm.start(1):])
                if name and name not in labelled:
                    labelled.append(name)
    if len(labelled) >= 2:
        return FieldValue(labelled, 0.75)
    names: list[str] = []
    for name, _ in legal_names(view, max_lines=80):
        name = _SIGNATURE_PREFIX.sub("", name)
        if not any(name in n or n in name for n in names):
            names.append(name)
    if len(names) >= 2:
        return FieldValue(names[:4], 0.5)
    return FieldValue()


def _enumerated_parties(text: str) -> list[str]:
    """Names after consecutive markers (1), (2), ... that open the party descriptions."""
    names = []
    expected = 1
    last = 0
    for m in _ENUMERATION.finditer(text):
        marker = m.group(1)
        number = int(marker) if marker.isdigit() else ord(marker) - ord("a") + 1
        if number != expected:
            continue
        if m.start() - last > 800:
            break  # "(4) years" far below the list of parties is something else
        name = cut_name(text[m.end():m.end() + 300])
        if not name or not name[0].isupper():
            break
        names.append(name)
        expected += 1
        last = m.end()
    return names


def _second_party(head: str, folded: str, start: int, first: str) -> str | None:
    window = folded[start:start + 600]
    # The other party is the next legal-form name, when both are companies.
    if LEGAL_FORM.search(first):
        for m in _CONJUNCTION.finditer(window):
            name = company_name(head[start + m.end():start + m.end() + 200])
            candidate = cut_name(head[start + m.end():start + m.end() + 300])
            if name and candidate and candidate.startswith(name.split()[0]):
                return name
    # Otherwise the conjunction that follows a clause break (", and" / ") and") or the name.
    for m in _CONJUNCTION.finditer(window):
        before = window[:m.start()].rstrip()
        if m.start() == 0 or before.endswith((",", ")", "”", '"', ";")) or not before:
            name = cut_name(head[start + m.end():start + m.end() + 300])
            if name and fold(name) != fold(first):
                return name
    return None


def _term(text: str) -> FieldValue:
    folded = fold(text)
    fallback = None
    for m in _DURATION.finditer(folded):
        # Notice periods are named in the same sentence as their length.
        after = re.split(r"[.;]\s", folded[m.end():m.end() + 40])[0]
        before = re.split(r"[.;]\s", folded[max(0, m.start() - 120):m.start()])[-1]
        if _NOTICE.search(after) or _NOTICE.search(before[-25:]):
            continue
        number = m.group(1)
        count = int(number) if number.isdigit() else _NUMBER_WORDS[number]
        months = count * 12 if m.group(2) in _YEAR_UNITS else count
        if _TERM_WORDS.search(before):
            return FieldValue(months, 0.85)
        if fallback is None:
            fallback = months
    return FieldValue(fallback, 0.4) if fallback is not None else FieldValue()


def _governing_law(text: str) -> FieldValue:
    folded = fold(text)
    for pattern in _LAW_PATTERNS:
        m = pattern.search(folded)
        if not m:
            continue
        raw = m.group(1).strip()
        if raw in _ARTICLES:
            continue
        country = _country(raw)
        if country:
            return FieldValue(country, 0.85)
        original = text[m.start(1):m.start(1) + len(raw)]
        name = re.sub(r"^(?:the\s+)?(?:state|commonwealth|republic|province|canton) of\s+", "",
                      original, flags=re.IGNORECASE).strip()
        if name and len(name.split()) <= 6 and name[0].isalpha():
            return FieldValue(name[0].upper() + name[1:], 0.8)
    # A governing-law clause that names the country some other way.
    for m in _LAW_CLAUSE.finditer(folded):
        for word in re.findall(r"[a-z]+(?: [a-z]+)?", folded[m.end():m.end() + 160]):
            country = _country(word)
            if country:
                return FieldValue(country, 0.65)
    return FieldValue()


def _country(raw: str) -> str | None:
    for stem, country in _COUNTRIES.items():
        if raw.startswith(stem):
            return country
    return None
