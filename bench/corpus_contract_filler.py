"""Boilerplate clauses that pad bench-corpus contracts to length, with distracting numbers."""

from __future__ import annotations

import random
from datetime import date, timedelta

from bench.corpus_locale import Formatter, number_words

FILLER_HEADINGS = {
    "en": ["Definitions and Interpretation", "Scope of Services", "Service Levels",
           "Obligations of the {a}", "Obligations of the {b}", "Confidentiality",
           "Intellectual Property", "Warranties", "Limitation of Liability", "Insurance",
           "Data Protection", "Force Majeure", "Termination", "Consequences of Termination",
           "Subcontracting", "Assignment", "Notices", "Audit Rights", "Anti-Bribery",
           "Severability", "Entire Agreement", "Variation", "Change Control", "Acceptance"],
    "it": ["Definizioni", "Oggetto del Contratto", "Livelli di servizio", "Obblighi del {a}",
           "Obblighi del {b}", "Riservatezza", "Proprietà intellettuale", "Garanzie",
           "Limitazione di responsabilità", "Assicurazione", "Trattamento dei dati personali",
           "Forza maggiore", "Recesso", "Risoluzione", "Subappalto", "Cessione del Contratto",
           "Comunicazioni", "Verifiche", "Penali", "Clausola di salvaguardia", "Intero accordo",
           "Modifiche", "Collaudo", "Codice etico"],
    "fr": ["Définitions", "Objet du contrat", "Niveaux de service", "Obligations du {a}",
           "Obligations du {b}", "Confidentialité", "Propriété intellectuelle", "Garanties",
           "Limitation de responsabilité", "Assurances", "Protection des données",
           "Force majeure", "Résiliation", "Effets de la résiliation", "Sous-traitance",
           "Cession", "Notifications", "Audit", "Pénalités", "Divisibilité",
           "Intégralité de l'accord", "Modifications", "Recette", "Éthique"],
    "de": ["Begriffsbestimmungen", "Vertragsgegenstand", "Leistungsumfang",
           "Pflichten des {a}s", "Mitwirkungspflichten des {b}s", "Vertraulichkeit",
           "Nutzungsrechte", "Gewährleistung", "Haftung", "Versicherung", "Datenschutz",
           "Höhere Gewalt", "Kündigung", "Folgen der Kündigung", "Unterauftragnehmer",
           "Abtretung", "Mitteilungen", "Prüfungsrechte", "Vertragsstrafe",
           "Salvatorische Klausel", "Schlussbestimmungen", "Änderungen", "Abnahme",
           "Compliance"],
}

FILLER_SENTENCES = {
    "en": [
        "The {a} shall perform its obligations with the skill, care and diligence expected of a "
        "leading provider of similar services.",
        "Each party shall keep confidential all information disclosed to it by the other party "
        "and shall not use such information except for the purposes of this Agreement.",
        "Neither party shall be liable for any indirect, special or consequential loss.",
        "The aggregate liability of each party under this Agreement shall not exceed {amount}.",
        "The {a} shall maintain professional indemnity insurance with a limit of not less than "
        "{amount} for each claim.",
        "Any invoice not paid when due shall bear interest at {pct} per cent per annum above the "
        "base rate.",
        "Either party may terminate this Agreement by giving not less than {days} days' written "
        "notice to the other party.",
        "The {b} shall provide the {a} with such access to its premises, systems and personnel as "
        "the {a} reasonably requires.",
        "The Data Processing Addendum dated {date} forms an integral part of this Agreement.",
        "No variation of this Agreement shall be effective unless it is in writing and signed by "
        "authorised representatives of both parties.",
        "All notices shall be in writing and delivered by hand, by registered post or by email "
        "to the addresses set out above.",
        "Service credits shall not exceed {pct} per cent of the monthly charges.",
        "Purchase order reference {ref} applies to all deliveries under this Agreement.",
        "The {a} shall respond to priority one incidents within {days} minutes during business "
        "hours.",
        "If any provision of this Agreement is held invalid, the remaining provisions shall "
        "remain in full force and effect.",
        "Force majeure shall not excuse any obligation to pay money due under this Agreement.",
    ],
    "it": [
        "Il {a} si impegna ad eseguire le prestazioni con la diligenza professionale richiesta "
        "dalla natura dell'attività esercitata.",
        "Ciascuna parte si obbliga a mantenere riservate le informazioni ricevute dall'altra "
        "parte e a non divulgarle a terzi.",
        "La responsabilità complessiva di ciascuna parte non potrà in alcun caso eccedere "
        "{amount}.",
        "Il {a} dichiara di aver stipulato una polizza assicurativa con massimale non inferiore "
        "a {amount} per sinistro.",
        "In caso di ritardo nei pagamenti saranno dovuti interessi di mora nella misura del "
        "{pct}%.",
        "Ciascuna parte potrà recedere dal Contratto con un preavviso scritto di almeno {days} "
        "giorni.",
        "Il {b} garantisce al {a} l'accesso ai propri locali e sistemi nella misura necessaria.",
        "L'accordo sul trattamento dei dati personali sottoscritto in data {date} costituisce "
        "parte integrante del Contratto.",
        "Qualsiasi modifica al Contratto dovrà essere concordata per iscritto tra le parti.",
        "Le comunicazioni dovranno essere effettuate per iscritto a mezzo PEC o raccomandata A/R.",
        "Le penali applicabili non potranno superare il {pct}% del corrispettivo mensile.",
        "Tutte le consegne faranno riferimento all'ordine n. {ref}.",
        "L'eventuale invalidità di una clausola non comporterà l'invalidità delle restanti "
        "disposizioni.",
        "Il {a} interverrà sulle segnalazioni urgenti entro {days} minuti in orario lavorativo.",
    ],
    "fr": [
        "Le {a} s'engage à exécuter ses prestations avec tout le soin et la diligence requis par "
        "les règles de l'art.",
        "Chaque partie s'engage à garder confidentielles les informations communiquées par "
        "l'autre partie.",
        "La responsabilité totale de chaque partie au titre du contrat est plafonnée à {amount}.",
        "Le {a} déclare être titulaire d'une police d'assurance responsabilité civile "
        "professionnelle d'un montant minimal de {amount} par sinistre.",
        "Tout retard de paiement donnera lieu à des pénalités calculées au taux de {pct} %.",
        "Chaque partie pourra résilier le contrat moyennant un préavis écrit de {days} jours.",
        "Le {b} donne au {a} accès à ses locaux et systèmes dans la mesure nécessaire.",
        "L'accord relatif au traitement des données signé le {date} fait partie intégrante du "
        "contrat.",
        "Toute modification du contrat fera l'objet d'un avenant écrit signé par les parties.",
        "Les notifications sont effectuées par lettre recommandée avec accusé de réception.",
        "Les pénalités de retard ne pourront excéder {pct} % de la redevance mensuelle.",
        "Toutes les livraisons se réfèrent au bon de commande n° {ref}.",
        "La nullité d'une clause n'affectera pas la validité des autres stipulations.",
        "Le {a} intervient sur les incidents critiques dans un délai de {days} minutes.",
    ],
    "de": [
        "Der {a} erbringt die Leistungen mit der Sorgfalt eines ordentlichen Kaufmanns nach dem "
        "Stand der Technik.",
        "Die Parteien verpflichten sich, alle vertraulichen Informationen der jeweils anderen "
        "Partei geheim zu halten.",
        "Die Gesamthaftung jeder Partei ist auf einen Betrag von {amount} begrenzt.",
        "Der {a} unterhält eine Berufshaftpflichtversicherung mit einer Deckungssumme von "
        "mindestens {amount} je Schadensfall.",
        "Bei Zahlungsverzug sind Verzugszinsen in Höhe von {pct} Prozentpunkten über dem "
        "Basiszinssatz geschuldet.",
        "Jede Partei kann diesen Vertrag mit einer Frist von {days} Tagen schriftlich kündigen.",
        "Der {b} gewährt dem {a} Zugang zu seinen Räumlichkeiten und Systemen, soweit "
        "erforderlich.",
        "Die Vereinbarung zur Auftragsverarbeitung vom {date} ist Bestandteil dieses Vertrags.",
        "Änderungen und Ergänzungen dieses Vertrags bedürfen der Schriftform.",
        "Mitteilungen erfolgen schriftlich per Einschreiben oder per E-Mail.",
        "Die Vertragsstrafe ist auf {pct} Prozent der monatlichen Vergütung begrenzt.",
        "Alle Lieferungen beziehen sich auf die Bestellung Nr. {ref}.",
        "Sollte eine Bestimmung unwirksam sein, bleibt die Wirksamkeit der übrigen Bestimmungen "
        "unberührt.",
        "Der {a} reagiert auf kritische Störungen innerhalb von {days} Minuten.",
    ],
}


class FillerWriter:
    """Deterministic stream of boilerplate clauses for one contract."""

    def __init__(self, seed: int, lang: str, fmt: Formatter, currency: str, roles: tuple,
                 anchor: date):
        self.rng = random.Random(seed)
        self.lang, self.fmt, self.currency = lang, fmt, currency
        self.roles = roles
        self.anchor = anchor
        self.count = 0

    def _days(self) -> str:
        n = self.rng.choice([10, 14, 30, 60, 90])
        return f"{number_words(n, self.lang)} ({n})" if self.rng.random() < 0.5 else str(n)

    def sentence(self) -> str:
        template = self.rng.choice(FILLER_SENTENCES[self.lang])
        amount = self.rng.choice([50000, 100000, 250000, 500000, 1000000, 2000000, 5000000])
        noise_date = self.anchor - timedelta(days=self.rng.randint(5, 400))
        return template.format(
            a=self.roles[0], b=self.roles[1], amount=self.fmt.money(amount, self.currency),
            pct=self.rng.choice([2, 3, 5, 8, 10]), days=self._days(),
            date=self.fmt.date(noise_date),
            ref=self.fmt.num(self.rng.randint(1000, 99999) + self.rng.choice([0, 0.5])))

    def clause(self) -> tuple[str, list[str]]:
        """A heading and one to four paragraphs of three to six sentences."""
        self.count += 1
        heading = self.rng.choice(FILLER_HEADINGS[self.lang]).format(a=self.roles[0],
                                                                       b=self.roles[1])
        paragraphs = [" ".join(self.sentence() for _ in range(self.rng.randint(3, 6)))
                      for _ in range(self.rng.randint(1, 4))]
        return heading, paragraphs
