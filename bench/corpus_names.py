"""Fictitious companies, addresses and registration details for each bench corpus locale."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from bench.corpus_locale import Formatter

SURNAMES = {
    "IT": ["Rossi", "Bianchi", "Ferrari", "Esposito", "Colombo", "Ricci", "Marino", "Greco",
           "Bruno", "Gallo", "Conti", "De Luca", "Mancini", "Costa", "Giordano", "Lombardi"],
    "DE": ["Müller", "Schmidt", "Schneider", "Fischer", "Weber", "Meyer", "Wagner", "Becker",
           "Schulz", "Hoffmann", "Koch", "Richter", "Klein", "Wolf", "Schröder", "Neumann"],
    "CH": ["Keller", "Huber", "Meier", "Brunner", "Gerber", "Baumann", "Frei", "Zimmermann",
           "Moser", "Widmer", "Steiner", "Graf"],
    "FR": ["Martin", "Bernard", "Dubois", "Thomas", "Robert", "Richard", "Petit", "Durand",
           "Leroy", "Moreau", "Simon", "Laurent", "Lefèvre", "Michel", "Garnier", "Fontaine"],
    "GB": ["Smith", "Jones", "Taylor", "Brown", "Williams", "Wilson", "Johnson", "Davies",
           "Robinson", "Wright", "Thompson", "Evans", "Walker", "Hughes", "Ashworth", "Pryce"],
    "US": ["Summit", "Pioneer", "Granite", "Blue Harbor", "Redwood", "Liberty", "Keystone",
           "Northstar", "Cedar Ridge", "Lakeshore", "Evergreen", "Ironclad", "Bayview", "Sterling"],
}

TRADES = {
    "IT": ["Impianti", "Tecnologie", "Servizi Industriali", "Logistica", "Costruzioni",
           "Informatica", "Meccanica", "Forniture", "Energia"],
    "DE": ["Maschinenbau", "Logistik", "Elektrotechnik", "Software", "Bau", "Verpackungen",
           "Medizintechnik", "Beratung", "Antriebstechnik"],
    "CH": ["Präzisionstechnik", "Treuhand", "Informatik", "Logistik", "Uhrenkomponenten",
           "Gebäudetechnik"],
    "FR": ["Conseil", "Industries", "Transports", "Solutions Numériques", "Bâtiment",
           "Distribution", "Énergie", "Ingénierie"],
    "GB": ["Engineering", "Consulting", "Logistics", "Software", "Holdings", "Trading",
           "Supplies", "Analytics", "Facilities"],
    "US": ["Technologies", "Systems", "Partners", "Labs", "Industries", "Networks", "Capital",
           "Solutions", "Logistics"],
}

SUFFIXES = {
    "IT": ["S.r.l.", "S.p.A.", "S.r.l.", "S.n.c."],
    "DE": ["GmbH", "AG", "GmbH & Co. KG", "GmbH", "KG"],
    "CH": ["AG", "GmbH", "SA"],
    "FR": ["SAS", "SARL", "S.A.", "SASU"],
    "GB": ["Ltd", "Limited", "PLC", "LLP"],
    "US": ["Inc.", "LLC", "Corp.", "Co."],
}

STREETS = {
    "IT": ["Via Garibaldi {n}", "Via Roma {n}", "Corso Venezia {n}", "Viale Mazzini {n}",
           "Piazza Cavour {n}", "Via Dante Alighieri {n}"],
    "DE": ["Hauptstraße {n}", "Bahnhofstraße {n}", "Industriestraße {n}", "Lindenallee {n}",
           "Am Gewerbepark {n}", "Schillerstraße {n}"],
    "CH": ["Bahnhofstrasse {n}", "Seestrasse {n}", "Industriestrasse {n}", "Dorfstrasse {n}"],
    "FR": ["{n} rue de la République", "{n} avenue Jean Jaurès", "{n} boulevard Haussmann",
           "{n} rue Victor Hugo", "{n} rue du Général Leclerc"],
    "GB": ["{n} High Street", "{n} Station Road", "{n} King Street", "Unit {n}, Riverside Park",
           "{n} Victoria Road"],
    "US": ["{n} Main Street", "{n} Market Street, Suite {m}", "{n} Oak Avenue",
           "{n} Fifth Avenue, Floor {m}", "{n} Elm Street"],
}

CITIES = {
    "IT": ["20121 Milano (MI)", "10121 Torino (TO)", "00184 Roma (RM)", "40121 Bologna (BO)",
           "50123 Firenze (FI)", "37121 Verona (VR)", "24121 Bergamo (BG)"],
    "DE": ["80331 München", "10115 Berlin", "20095 Hamburg", "50667 Köln",
           "60311 Frankfurt am Main", "70173 Stuttgart", "04109 Leipzig"],
    "CH": ["8001 Zürich", "3011 Bern", "4051 Basel", "6003 Luzern", "9000 St. Gallen"],
    "FR": ["75008 Paris", "69002 Lyon", "13001 Marseille", "31000 Toulouse", "33000 Bordeaux",
           "59000 Lille", "44000 Nantes"],
    "GB": ["London EC1A 1BB", "Manchester M1 1AE", "Leeds LS1 4AP", "Bristol BS1 4DJ",
           "Birmingham B2 4QA", "Edinburgh EH1 1YZ"],
    "US": ["New York, NY 10001", "Austin, TX 78701", "Chicago, IL 60601", "Boston, MA 02108",
           "San Francisco, CA 94105", "Seattle, WA 98101", "Denver, CO 80202"],
}

COUNTRY_NAMES = {
    "en": {"IT": "Italy", "DE": "Germany", "CH": "Switzerland", "FR": "France",
           "GB": "United Kingdom", "US": "USA"},
    "it": {"IT": "Italia", "DE": "Germania", "CH": "Svizzera", "FR": "Francia",
           "GB": "Regno Unito", "US": "Stati Uniti"},
    "fr": {"IT": "Italie", "DE": "Allemagne", "CH": "Suisse", "FR": "France",
           "GB": "Royaume-Uni", "US": "États-Unis"},
    "de": {"IT": "Italien", "DE": "Deutschland", "CH": "Schweiz", "FR": "Frankreich",
           "GB": "Vereinigtes Königreich", "US": "USA"},
}

PEOPLE = {
    "IT": ["Marco Rossi", "Giulia Bianchi", "Luca Ferrari", "Francesca Conti"],
    "DE": ["Thomas Müller", "Anna Schmidt", "Stefan Weber", "Claudia Becker"],
    "CH": ["Martin Keller", "Sandra Huber", "Peter Meier", "Nadia Brunner"],
    "FR": ["Jean Martin", "Claire Dubois", "Pierre Lefèvre", "Sophie Laurent"],
    "GB": ["James Taylor", "Emma Wilson", "Oliver Hughes", "Sarah Davies"],
    "US": ["Michael Carter", "Jennifer Lopez-Reed", "David Kim", "Emily Walsh"],
}


def _digits(rng: random.Random, n: int) -> str:
    return "".join(str(rng.randrange(10)) for _ in range(n))


@dataclass
class Company:
    """A party on a document, with the identifiers real letterheads carry."""

    name: str
    country: str
    address: list[str]
    tax_id: str
    reg_line: str = ""
    people: list[str] = field(default_factory=list)

    @property
    def city(self) -> str:
        last = self.address[-1]
        return last.split(",")[0] if self.country == "US" else last.split(" ", 1)[-1]


def company_name(rng: random.Random, country: str) -> str:
    surnames, trades, suffix = SURNAMES[country], TRADES[country], rng.choice(SUFFIXES[country])
    pattern = rng.randrange(3)
    if pattern == 0:
        return f"{rng.choice(surnames)} {rng.choice(trades)} {suffix}"
    if pattern == 1:
        first, second = rng.sample(surnames, 2)
        return f"{first} & {second} {suffix}"
    return f"{rng.choice(trades)} {rng.choice(surnames)} {suffix}"


def tax_id(rng: random.Random, country: str) -> str:
    return {
        "IT": f"P.IVA IT{_digits(rng, 11)}",
        "DE": f"USt-IdNr. DE{_digits(rng, 9)}",
        "CH": f"UID CHE-{_digits(rng, 3)}.{_digits(rng, 3)}.{_digits(rng, 3)} MWST",
        "FR": f"TVA FR{_digits(rng, 2)} {_digits(rng, 3)} {_digits(rng, 3)} {_digits(rng, 3)}",
        "GB": f"VAT Reg. No. GB {_digits(rng, 3)} {_digits(rng, 4)} {_digits(rng, 2)}",
        "US": f"EIN {_digits(rng, 2)}-{_digits(rng, 7)}",
    }[country]


def registration_line(rng: random.Random, company: Company, fmt: Formatter) -> str:
    """Statutory footer text; the share capital is an amount that is not the document total."""
    capital = fmt.money(rng.choice([10000, 25000, 50000, 100000, 120000]), "EUR")
    city = company.city
    return {
        "IT": f"{company.name} - Capitale sociale {capital} i.v. - R.E.A. "
              f"{city[:2].upper()}-{_digits(rng, 7)} - {company.tax_id}",
        "DE": f"{company.name} · Sitz {city} · Amtsgericht {city} HRB {_digits(rng, 6)} · "
              f"Stammkapital {capital}",
        "CH": f"{company.name} · Handelsregister des Kantons {city} · {company.tax_id}",
        "FR": f"{company.name} au capital de {capital} - RCS {city} {_digits(rng, 3)} "
              f"{_digits(rng, 3)} {_digits(rng, 3)} - SIRET {_digits(rng, 14)}",
        "GB": f"{company.name} · Registered in England and Wales No. {_digits(rng, 8)} · "
              f"{company.tax_id}",
        "US": f"{company.name} · {company.tax_id} · {company.address[-1]}",
    }[company.country]


def make_company(rng: random.Random, country: str, fmt: Formatter,
                 exclude: set[str] | None = None) -> Company:
    name = company_name(rng, country)
    while exclude and name in exclude:
        name = company_name(rng, country)
    street = rng.choice(STREETS[country]).format(n=rng.randint(1, 240), m=rng.randint(100, 990))
    company = Company(name, country, [street, rng.choice(CITIES[country])],
                      tax_id(rng, country), people=rng.sample(PEOPLE[country], 2))
    company.reg_line = registration_line(rng, company, fmt)
    return company


def partner_country(rng: random.Random, country: str) -> str:
    """Mostly domestic counterparties, sometimes a foreign one as in cross-border trade."""
    if rng.random() < 0.8:
        return country
    return rng.choice([c for c in SURNAMES if c != country])
