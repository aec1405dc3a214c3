"""Detect invoice line-item tables: a header row of known column names and the rows under it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agents.amounts import money_values, parse_number
from agents.layout import Cell, Line, fold

# Column names, accent-folded, en/it/fr/de; a header row needs two of them.
_COLUMNS = {
    "description": "description, descr, item, items, article, articolo, articoli, product, "
                   "products, service, services, prodotto, servizio, descrizione, designation, "
                   "libelle, produit, prestation, beschreibung, bezeichnung, artikel, leistung, "
                   "position, details, particulars, oggetto",
    "quantity": "qty, qty., quantity, quantities, qta, q.ta, quantita, qte, qte., quantite, "
                "menge, anzahl, anz, anz., stk, stuck, units, hours, ore, heures, stunden, pcs, pz",
    "unit_price": "unit price, price, unit cost, rate, prezzo, prezzo unitario, prezzo unit., "
                  "p.u., pu, prix, prix unitaire, prix unit., prix u., pu ht, einzelpreis, "
                  "preis, e-preis, ep, stuckpreis, price/unit, tariffa, tarif",
    "amount": "amount, total, line total, importo, totale, importo totale, montant, "
              "montant ht, total ht, betrag, gesamt, gesamtpreis, summe, netto, net amount, "
              "value, valore, gesamtbetrag, imponibile, importo netto, totale riga",
    # Columns that are neither of the above but must not lend their figures to them.
    "other": "vat %, vat, iva %, iva, tva %, tva, taux tva, taux, ust %, ust, mwst %, mwst, "
             "tax %, tax rate, aliq., aliquota, aliq. iva, sku, code, codice, cod., art., "
             "art. nr, pos., pos, nr., no., unit, um, u.m., einheit, unite, ref., reference",
}
_HEADER_PHRASES = sorted(
    {(phrase.strip(), kind) for kind, text in _COLUMNS.items() for phrase in text.split(",")},
    key=lambda p: -len(p[0]),
)
# Rows that close a table: totals and tax lines (a tax label followed only by its rate).
_STOP = re.compile(
    r"^(?:sub-?\s?total|total|totale|totaux|sous-total|imponibile|summe|gesamt|zwischensumme|"
    r"net a payer|amount due|balance due|importo totale|rechnungsbetrag|net amount|net total|"
    r"nettobetrag|netto|montant ht|montant total|subtotale|importo netto|gesamtbetrag|"
    r"grand total|totaal|subtotaal|te betalen|base imponible|importe total|total a pagar|"
    r"valor total|amount paid|payment received|balance|somme a payer)\b"
    r"|^(?:vat|iva|tva|mwst|ust|tax|sales tax|gst|btw|cgst|sgst|igst)\b[\s\d%.,:()]*$"
)
_NUMERIC_KINDS = ("quantity", "unit_price", "amount")
_LEADING_NUMBER = re.compile(r"^(\d+(?:[.,]\d{1,3})?)\s+(\S.*)$")


@dataclass
class Table:
    """A line-item table: where its header is and the items read under it."""

    header_lines: set[int]
    last_item_line: int = 0
    items: list[dict] = field(default_factory=list)
    consistent_rows: int = 0


def _column_kind(cell: Cell) -> str | None:
    text = fold(cell.text).strip(" :#")
    if len(text) > 40:
        return None
    joined = text.replace(" ", "")  # words wrapped inside a narrow column: "quantit a"
    for phrase, kind in _HEADER_PHRASES:
        if text == phrase or text.startswith(phrase + " ") or text.endswith(" " + phrase):
            return kind
        if joined == phrase.replace(" ", ""):
            return kind
    return None


def find_tables(lines: list[Line], pages: list[int]) -> list[Table]:
    """Every table whose header names at least two columns, one of them numeric."""
    tables = []
    consumed: set[int] = set()
    for li, line in enumerate(lines):
        if li in consumed or not _is_header([_column_kind(c) for c in line.cells]):
            continue
        own_cells = [part for cell in line.cells for part in _split_header_cell(cell)]
        head_cells, first_row, merged = _merge_header(lines, pages, li, own_cells)
        consumed |= merged
        kinds = [_column_kind(c) for c in head_cells]
        table = _read_rows(lines, pages, li, first_row, head_cells, kinds, merged)
        # A header repeated on the next page belongs to the table already read through it.
        consumed |= set(range(li, max(table.last_item_line, li) + 1))
        tables.append(table)
    return [t for t in tables if t.items]


def _is_header(kinds: list[str | None]) -> bool:
    named = {k for k in kinds if k and k != "other"}
    return len(named) >= 2 and bool(named & set(_NUMERIC_KINDS))


def _merge_header(lines: list[Line], pages: list[int], li: int,
                  own_cells: list[Cell]) -> tuple[tuple[Cell, ...], int, set[int]]:
    """Header cells including wrapped parts on the rows just above and below ("Quantit" / "à")."""
    cells = list(own_cells)
    first_row = li + 1
    merged = {li}
    neighbours = [(li - 1, True), (li + 1, False), (li + 2, False)]
    for index, above in neighbours:
        if not 0 <= index < len(lines) or pages[index] != pages[li]:
            continue
        if not above and index != first_row:
            break
        fragment = lines[index]
        if not _is_header_fragment(fragment, len(lines[li].cells)):
            if not above:
                break
            continue
        merged.add(index)
        for part in fragment.cells:
            hit = next((i for i, c in enumerate(cells) if c.overlaps(part) > 0), None)
            if hit is None:
                cells.append(part)
                continue
            head = cells[hit]
            text = f"{part.text} {head.text}" if above else f"{head.text} {part.text}"
            cells[hit] = Cell(text, min(head.x0, part.x0), max(head.x1, part.x1))
        if not above:
            first_row = index + 1
    return tuple(sorted(cells, key=lambda c: c.x0)), first_row, merged


def _split_header_cell(cell: Cell) -> list[Cell]:
    """Two column names printed too close to part ("Unit price VAT %") as two cells."""
    if _exact_kind(cell.text):
        return [cell]
    words = cell.text.split(" ")
    for cut in range(1, len(words)):
        left, right = " ".join(words[:cut]), " ".join(words[cut:])
        if _exact_kind(left) and _exact_kind(right):
            middle = _x_at(cell, len(left) + 0.5)
            return [Cell(left, cell.x0, middle), Cell(right, middle, cell.x1)]
    return [cell]


def _exact_kind(text: str) -> str | None:
    text = re.sub(r"\s*\([^)]*\)$", "", fold(text).strip(" :#"))
    return next((kind for phrase, kind in _HEADER_PHRASES if text == phrase), None)


def _x_at(cell: Cell, chars: float) -> float:
    """The x position `chars` characters into a cell, assuming even character widths."""
    return cell.x0 + (cell.x1 - cell.x0) * chars / max(len(cell.text), 1)


def _is_header_fragment(line: Line, header_cells: int) -> bool:
    # Wrapped header words are short and hold no digits; data rows (and dates) always do.
    return (len(line.cells) <= header_cells + 1
            and all(len(c.text) <= 25 for c in line.cells)
            and not any(ch.isdigit() for ch in line.text))


def _read_rows(lines: list[Line], pages: list[int], header: int, first_row: int,
               head_cells: tuple[Cell, ...], kinds: list[str | None],
               header_lines: set[int]) -> Table:
    table = Table(header_lines=header_lines)
    misses = 0
    running_header = 0  # lines to pass over at the top of a page the table continues on
    wrapped: tuple[int, str] | None = None  # the last text-only line joined to an item
    li = first_row
    while li < len(lines):
        line = lines[li]
        if _STOP.match(fold(line.cells[0].text)):
            break
        item = _read_row(line, head_cells, kinds)
        if item is not None and item["description"] is None and not (
                wrapped and wrapped[0] == li - 1
                and None not in (item["quantity"], item["unit_price"])
                and _product_matches(item["quantity"], item["unit_price"], item["amount"])):
            item = None  # figures alone ("1 / 2" in a footer) are no item
        if item is not None:
            if item["description"] is None and wrapped and wrapped[0] == li - 1:
                # The words just above opened this item, not the previous one.
                previous = table.items[-1]
                text = previous["description"]
                previous["description"] = text[:len(text) - len(wrapped[1])].rstrip() or None
                item["description"] = wrapped[1]
            misses = running_header = 0
            wrapped = None
            table.items.append(item)
            table.last_item_line = li
            li += 1
            continue
        if running_header:
            running_header -= 1
            li += 1
            continue
        # A text-only line right under an item continues that item's description.
        if table.items and misses == 0 and _fits_description(line, head_cells, kinds):
            last = table.items[-1]
            last["description"] = f"{last['description'] or ''} {line.text}".strip()
            wrapped = (li, line.text)
            li += 1
            continue
        misses += 1
        if misses >= 2:
            following = _next_page_start(lines, pages, li)
            if following is None or not _rest_of_page_is_not_items(lines, pages, li, head_cells,
                                                                   kinds):
                break
            # The table runs on over the page break, under the next page's running header.
            li, misses, running_header = following, 0, 5
            continue
        li += 1
    _drop_trailing_totals(table)
    table.consistent_rows = sum(
        1 for item in table.items
        if None not in (item["quantity"], item["unit_price"])
        and _product_matches(item["quantity"], item["unit_price"], item["amount"]))
    return table


def _next_page_start(lines: list[Line], pages: list[int], li: int) -> int | None:
    for index in range(li, len(lines)):
        if pages[index] != pages[li]:
            return index
    return None


def _rest_of_page_is_not_items(lines, pages, li, head_cells, kinds) -> bool:
    index = li
    while index < len(lines) and pages[index] == pages[li]:
        if _STOP.match(fold(lines[index].cells[0].text)):
            return False
        if _read_row(lines[index], head_cells, kinds) is not None:
            return False
        index += 1
    return True


def _drop_trailing_totals(table: Table) -> None:
    # A totals row the stop words missed reads as an item with an amount and nothing else.
    items = table.items
    detailed = sum(1 for i in items if i["quantity"] is not None or i["unit_price"] is not None)
    if detailed * 2 < len(items):
        return
    while items and items[-1]["quantity"] is None and items[-1]["unit_price"] is None:
        items.pop()


def _read_row(line: Line, head_cells: tuple[Cell, ...], kinds: list[str | None]) -> dict | None:
    item: dict = {"description": None, "quantity": None, "unit_price": None, "amount": None}
    texts: list[str] = []
    numbers: list[tuple[Cell, float]] = []
    for cell in line.cells:
        values = money_values(cell.text)
        # Two figures printed too close together share one cell: split them by position.
        if values and _is_numeric(cell.text):
            for value in values:
                part = Cell(cell.text[value.start:value.end], _x_at(cell, value.start),
                            _x_at(cell, value.end))
                numbers.append((part if len(values) > 1 else cell, value.value))
        else:
            texts.append(cell.text)
    if not numbers:
        return None
    numeric_cols = [(c, k) for c, k in zip(head_cells, kinds) if k in _NUMERIC_KINDS]
    assigned = _assign_by_position(numbers, head_cells, kinds)
    if assigned is None and len(numbers) == len(numeric_cols):
        # Positions disagree (text layouts, shifted alignment): fall back to column order.
        assigned = {k: v for (_, v), (_, k) in zip(numbers, numeric_cols)}
    if assigned is None:
        return None
    item.update(assigned)
    if item["amount"] is None and item["quantity"] is not None and item["unit_price"] is not None:
        item["amount"] = round(item["quantity"] * item["unit_price"], 2)
    if item["unit_price"] is None and item["quantity"] and item["amount"] is not None:
        item["unit_price"] = round(item["amount"] / item["quantity"], 2)
    if item["amount"] is None:
        return None
    if not texts:
        # Figures without words: the description was wrapped onto the line above.
        return item if len(assigned) >= 2 else None
    if item["quantity"] is None:
        _split_leading_quantity(item, texts)
    item["description"] = " ".join(texts).strip()
    return item


def _fits_description(line: Line, head_cells: tuple[Cell, ...], kinds: list[str | None]) -> bool:
    """Whether a line is words wrapped inside the description column (no figures, not wider)."""
    if any(_is_numeric(c.text) for c in line.cells):
        return False
    columns = [c for c, k in zip(head_cells, kinds) if k == "description"]
    if not columns:
        return len(line.text) <= 60
    column = max(columns, key=lambda c: c.x1 - c.x0)
    following = [c.x0 for c in head_cells if c.x0 > column.x1]
    right = min(following) if following else float("inf")
    return all(c.x1 <= right + 2 for c in line.cells)


def _is_numeric(text: str) -> bool:
    """Whether a cell holds figures (with their currency) and nothing else."""
    return bool(money_values(text)) and len(re.sub(r"[\d\s.,'’()€$£%\-A-Z]", "", text)) <= 1


def _split_leading_quantity(item: dict, texts: list[str]) -> None:
    # Monospaced layouts print "50 On-site support" with one space between the columns; the
    # number is the quantity when quantity x unit price gives the amount.
    m = _LEADING_NUMBER.match(texts[0])
    if not m:
        return
    quantity = parse_number(m.group(1))
    unit, amount = item["unit_price"], item["amount"]
    if not quantity or (unit is not None and not _product_matches(quantity, unit, amount)):
        return
    item["quantity"] = quantity
    if unit is None:
        item["unit_price"] = round(amount / quantity, 2)
    texts[0] = m.group(2)


def _assign_by_position(numbers, head_cells, kinds) -> dict | None:
    assigned: dict[str, float] = {}
    for cell, value in numbers:
        overlaps = [(cell.overlaps(h), i) for i, h in enumerate(head_cells)]
        best_overlap, index = max(overlaps)
        if best_overlap <= 0:
            index = min(range(len(head_cells)),
                        key=lambda i: abs(head_cells[i].center - cell.center))
        kind = kinds[index]
        if kind == "description" and len([k for k in kinds if k == "description"]) == 1:
            return None
        # Under a second description column ("SKU", "Art.") a number is a code: skip it.
        if kind in _NUMERIC_KINDS:
            if kind in assigned:
                return None
            assigned[kind] = value
    return assigned or None


def _product_matches(quantity: float, unit_price: float, amount: float) -> bool:
    # Printed unit prices are rounded, so allow a cent per unit of the amount's magnitude.
    return abs(quantity * unit_price - amount) <= 0.011 * max(1.0, abs(amount))


def find_headerless_items(lines: list[Line], pages: list[int]) -> list[dict]:
    """Rows of text then quantity, unit price and amount where quantity x price = amount."""
    items = []
    for line in lines:
        if len(line.cells) < 3:
            continue
        values = [v[0].value for c in line.cells[1:] if len(v := money_values(c.text)) == 1]
        if len(values) < 3 or _STOP.match(fold(line.cells[0].text)):
            continue
        q, u, a = values[-3:]
        if q > 0 and _product_matches(q, u, a):
            items.append({"description": line.cells[0].text, "quantity": q, "unit_price": u,
                          "amount": a})
    return items
