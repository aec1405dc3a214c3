"""Contract wording for the bench corpus: titles, parties, term, value and governing law.

Governing-law ground truth is a short English jurisdiction name, whatever the wording:
a national law becomes the country ("legge italiana" -> "Italy", "droit français" ->
"France", "deutschem Recht" -> "Germany", "schweizerischem Recht"/"droit suisse" ->
"Switzerland"), a US state law becomes the state ("laws of the State of New York" ->
"New York"), and English law becomes "England and Wales".
"""

from __future__ import annotations

import random

from bench.corpus_locale import number_words

TITLES = {
    "en": {"services": "MASTER SERVICES AGREEMENT", "licence": "SOFTWARE LICENSE AGREEMENT",
           "supply": "SUPPLY AGREEMENT", "consulting": "CONSULTING AGREEMENT"},
    "it": {"services": "CONTRATTO DI PRESTAZIONE DI SERVIZI",
           "licence": "CONTRATTO DI LICENZA D'USO SOFTWARE",
           "supply": "CONTRATTO DI FORNITURA", "consulting": "CONTRATTO DI CONSULENZA"},
    "fr": {"services": "CONTRAT DE PRESTATION DE SERVICES",
           "licence": "CONTRAT DE LICENCE DE LOGICIEL",
           "supply": "CONTRAT DE FOURNITURE", "consulting": "CONTRAT DE CONSEIL"},
    "de": {"services": "DIENSTLEISTUNGSVERTRAG", "licence": "SOFTWARELIZENZVERTRAG",
           "supply": "LIEFERVERTRAG", "consulting": "BERATUNGSVERTRAG"},
}

ROLES = {
    "en": {"services": ("Service Provider", "Client"), "licence": ("Licensor", "Licensee"),
           "supply": ("Supplier", "Purchaser"), "consulting": ("Consultant", "Company"),
           "third": "Guarantor"},
    "it": {"services": ("Fornitore", "Cliente"), "licence": ("Licenziante", "Licenziatario"),
           "supply": ("Fornitore", "Acquirente"), "consulting": ("Consulente", "Committente"),
           "third": "Garante"},
    "fr": {"services": ("Prestataire", "Client"), "licence": ("Concédant", "Licencié"),
           "supply": ("Fournisseur", "Acheteur"), "consulting": ("Consultant", "Client"),
           "third": "Garant"},
    "de": {"services": ("Auftragnehmer", "Auftraggeber"),
           "licence": ("Lizenzgeber", "Lizenznehmer"),
           "supply": ("Lieferant", "Käufer"), "consulting": ("Berater", "Auftraggeber"),
           "third": "Bürge"},
}

PREAMBLE = {
    "en": 'This {title} (the "Agreement") is made on {signing} by and between:',
    "it": 'Il presente contratto (il "Contratto") è stipulato in data {signing} tra:',
    "fr": "ENTRE LES SOUSSIGNÉS, le {signing} :",
    "de": "Dieser Vertrag wird am {signing} geschlossen zwischen",
}

PARTY = {
    "en": ['{name}, a company registered in {country}, whose registered office is at {address} '
           '("{role}")', '{name}, a company organised under the laws of {country}, having its '
           'principal place of business at {address} (the "{role}")'],
    "it": ['{name}, con sede legale in {address}, {tax_id}, in persona del legale rappresentante '
           'pro tempore (di seguito, il "{role}")'],
    "fr": ["{name}, société dont le siège social est situé {address}, {tax_id}, représentée par "
           "son représentant légal, ci-après dénommée « le {role} »"],
    "de": ["der {name}, {address}, vertreten durch die Geschäftsführung, - nachfolgend "
           "„{role}“ -"],
}

AND = {"en": "and", "it": "e", "fr": "ET", "de": "und"}

EFFECTIVE = {
    "en": ['This Agreement shall take effect on {eff} (the "Effective Date").',
           'The obligations of the parties under this Agreement commence on {eff} '
           '(the "Effective Date").'],
    "it": ['Il Contratto entra in vigore il {eff} (la "Data di Efficacia").',
           "Le obbligazioni delle parti decorrono dal {eff} (la \"Data di Efficacia\")."],
    "fr": ["Le présent contrat prend effet le {eff} (la « Date d'Effet »).",
           "Les obligations des parties courent à compter du {eff} (la « Date d'Effet »)."],
    "de": ["Dieser Vertrag tritt am {eff} in Kraft (nachfolgend „Stichtag“).",
           "Die vertraglichen Pflichten beginnen am {eff} (nachfolgend „Stichtag“)."],
}

TERM = {
    "en": ["This Agreement shall commence on the Effective Date and shall continue in force for "
           "a period of {term}, unless terminated earlier in accordance with its terms.",
           "The initial term of this Agreement is {term} from the Effective Date."],
    "it": ["Il Contratto ha una durata di {term} a decorrere dalla Data di Efficacia.",
           "La durata del presente Contratto è fissata in {term} dalla Data di Efficacia."],
    "fr": ["Le présent contrat est conclu pour une durée de {term} à compter de la Date d'Effet.",
           "La durée initiale du contrat est fixée à {term} à compter de la Date d'Effet."],
    "de": ["Die Vertragslaufzeit beträgt {term} ab dem Stichtag.",
           "Der Vertrag wird für eine Laufzeit von {term_dat} ab dem Stichtag geschlossen."],
}

RENEWAL = {
    "en": "Thereafter it shall renew automatically for successive periods of twelve (12) months "
          "unless either party gives not less than {notice} days' written notice of termination.",
    "it": "Alla scadenza il Contratto si rinnova tacitamente per periodi di dodici (12) mesi, "
          "salvo disdetta comunicata con un preavviso di almeno {notice} giorni.",
    "fr": "Il sera ensuite renouvelé tacitement par périodes successives de douze (12) mois, sauf "
          "dénonciation moyennant un préavis de {notice} jours.",
    "de": "Er verlängert sich danach automatisch um jeweils zwölf (12) Monate, sofern er nicht mit "
          "einer Frist von {notice} Tagen gekündigt wird.",
}

FEES = {
    "en": ['In consideration of the performance of this Agreement the {payer} shall pay a total '
           'contract value of {value}, exclusive of VAT.',
           "The total value of this Agreement is {value} for the whole term, payable in "
           "{instalments} equal instalments."],
    "it": ["Il corrispettivo complessivo per l'intera durata del Contratto è pari a {value}, "
           "oltre IVA.", "Il valore totale del Contratto ammonta a {value}, da corrispondersi in "
           "{instalments} rate di pari importo."],
    "fr": ["Le montant total du contrat s'élève à {value} hors taxes.",
           "En contrepartie, le {payer} versera un prix global et forfaitaire de {value} HT, "
           "payable en {instalments} échéances égales."],
    "de": ["Der Gesamtauftragswert beträgt {value} zzgl. der gesetzlichen Umsatzsteuer.",
           "Die Gesamtvergütung für die Vertragslaufzeit beläuft sich auf {value} netto, zahlbar "
           "in {instalments} gleichen Raten."],
}

HEADINGS = {
    "en": {"parties": "PARTIES", "term": "Term", "effective": "Commencement",
           "fees": "Fees and Payment",
           "law": "Governing Law and Jurisdiction", "sign": "IN WITNESS WHEREOF the parties have "
           "executed this Agreement.", "signed": "Signed for and on behalf of", "date": "Date",
           "clause": "Clause"},
    "it": {"parties": "PARTI", "term": "Durata", "effective": "Efficacia", "fees": "Corrispettivo",
           "law": "Legge applicabile e foro competente",
           "sign": "Letto, confermato e sottoscritto.",
           "signed": "Per", "date": "Data", "clause": "Articolo"},
    "fr": {"parties": "PARTIES", "term": "Durée", "effective": "Entrée en vigueur", "fees": "Prix",
           "law": "Droit applicable et juridiction", "sign": "Fait en deux exemplaires originaux.",
           "signed": "Pour", "date": "Date", "clause": "Article"},
    "de": {"parties": "VERTRAGSPARTEIEN", "term": "Vertragslaufzeit", "effective": "Inkrafttreten",
           "fees": "Vergütung", "law": "Anwendbares Recht und Gerichtsstand",
           "sign": "Unterschriften der Vertragsparteien", "signed": "Für", "date": "Datum",
           "clause": "§"},
}

GOVERNING_LAW = {
    "New York": {"en": ["This Agreement shall be governed by and construed in accordance with "
                        "the laws of the State of New York, without giving effect to its conflict "
                        "of laws principles."]},
    "Delaware": {"en": ["This Agreement shall be governed by the laws of the State of Delaware."]},
    "California": {"en": ["This Agreement and all disputes arising from it are governed by the "
                          "laws of the State of California."]},
    "England and Wales": {"en": ["This Agreement and any dispute arising out of it shall be "
                                 "governed by the laws of England and Wales.",
                                 "This Agreement is governed by English law."]},
    "Italy": {"it": ["Il presente Contratto è regolato dalla legge italiana.",
                     "Il presente Contratto è disciplinato dalle leggi della Repubblica Italiana."],
              "en": ["This Agreement shall be governed by the laws of the Republic of Italy."]},
    "France": {"fr": ["Le présent contrat est soumis au droit français.",
                      "Le présent contrat est régi par le droit français."],
               "en": ["This Agreement shall be governed by the laws of France."]},
    "Germany": {"de": ["Dieser Vertrag unterliegt deutschem Recht.",
                       "Es gilt das Recht der Bundesrepublik Deutschland unter Ausschluss des "
                       "UN-Kaufrechts."],
                "en": ["This Agreement shall be governed by the laws of the Federal Republic of "
                       "Germany."]},
    "Switzerland": {"de": ["Dieser Vertrag untersteht schweizerischem Recht.",
                           "Es gilt ausschliesslich schweizerisches Recht."],
                    "fr": ["Le présent contrat est soumis au droit suisse."],
                    "en": ["This Agreement is governed by the substantive laws of Switzerland."]},
}

COURTS = {
    "en": "The courts of {city} shall have exclusive jurisdiction.",
    "it": "Per ogni controversia è competente in via esclusiva il Foro di {city}.",
    "fr": "Tout litige sera soumis à la compétence exclusive des tribunaux de {city}.",
    "de": "Ausschließlicher Gerichtsstand ist {city}.",
}

# Jurisdictions a contract drafted in each locale plausibly chooses, most likely first.
LAW_BY_LOCALE = {
    "en-GB": ["England and Wales"] * 4 + ["Switzerland", "Germany", "New York"],
    "en-US": ["New York", "New York", "Delaware", "California"],
    "it-IT": ["Italy"],
    "fr-FR": ["France"] * 5 + ["Switzerland"],
    "de-DE": ["Germany"],
    "de-CH": ["Switzerland"],
}

UNITS = {
    # (singular, plural) per case; German needs the dative after "von".
    ("en", "months"): ("month", "months"), ("en", "years"): ("year", "years"),
    ("it", "months"): ("mese", "mesi"), ("it", "years"): ("anno", "anni"),
    ("fr", "months"): ("mois", "mois"), ("fr", "years"): ("an", "ans"),
    ("de", "months"): ("Monat", "Monate"), ("de", "years"): ("Jahr", "Jahre"),
    ("de-dat", "months"): ("Monat", "Monaten"), ("de-dat", "years"): ("Jahr", "Jahren"),
}


def term_phrase(rng: random.Random, months: int, lang: str) -> dict[str, str]:
    """The contract term in words and/or digits, in months or years; keys term and term_dat."""
    unit = "years" if months % 12 == 0 and rng.random() < 0.5 else "months"
    n = months // 12 if unit == "years" else months
    form = rng.choice(["both", "both", "digits", "words"])
    out = {}
    for key, case in (("term", lang), ("term_dat", "de-dat" if lang == "de" else lang)):
        word = number_words(n, lang)
        if case == "de-dat" and n == 1:
            word = "einem"
        elif lang == "de" and n == 1 and unit == "years":
            word = "ein"
        elif lang == "it" and n == 1 and unit == "months":
            word = "un"
        noun = UNITS[(case, unit)][0 if n == 1 else 1]
        out[key] = {"both": f"{word} ({n}) {noun}", "digits": f"{n} {noun}",
                    "words": f"{word} {noun}"}[form]
    return out
