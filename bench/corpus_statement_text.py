"""Financial-statement vocabulary for the bench corpus, per language."""

from __future__ import annotations

# Row keys in display order; a key ending in "_h" is a section heading without numbers.
INCOME_ROWS = ("revenue", "cogs", "gross", "admin", "other_income", "operating", "finance",
               "pbt", "tax", "net")
BALANCE_ROWS = ("assets_h", "nca_h", "ppe", "intangibles", "fin_assets", "nca_total", "ca_h",
                "inventories", "receivables", "cash", "ca_total", "total_assets", "el_h",
                "share_capital", "reserves", "net_bs", "equity_total", "borrowings", "payables",
                "other_liab", "liab_total", "total_el")
BOLD_ROWS = {"gross", "operating", "pbt", "net", "nca_total", "ca_total", "total_assets",
             "equity_total", "liab_total", "total_el", "assets_h", "el_h"}

ROW_LABELS = {
    "en": {
        "revenue": ["Revenue", "Turnover", "Net sales"], "cogs": ["Cost of sales"],
        "gross": ["Gross profit"], "admin": ["Administrative expenses"],
        "other_income": ["Other operating income"], "operating": ["Operating profit"],
        "finance": ["Net finance costs"], "pbt": ["Profit before tax"],
        "tax": ["Income tax expense"],
        "net": ["Profit for the year", "Net income", "Profit (loss) for the financial year"],
        "assets_h": ["ASSETS"], "nca_h": ["Non-current assets"],
        "ppe": ["Property, plant and equipment"], "intangibles": ["Intangible assets"],
        "fin_assets": ["Financial assets"], "nca_total": ["Total non-current assets"],
        "ca_h": ["Current assets"], "inventories": ["Inventories"],
        "receivables": ["Trade and other receivables"], "cash": ["Cash and cash equivalents"],
        "ca_total": ["Total current assets"], "total_assets": ["Total assets", "TOTAL ASSETS"],
        "el_h": ["EQUITY AND LIABILITIES"], "share_capital": ["Share capital"],
        "reserves": ["Retained earnings"], "net_bs": ["Result for the year"],
        "equity_total": ["Total equity"], "borrowings": ["Borrowings"],
        "payables": ["Trade and other payables"], "other_liab": ["Other liabilities"],
        "liab_total": ["Total liabilities"], "total_el": ["Total equity and liabilities"],
    },
    "it": {
        "revenue": ["Ricavi delle vendite e delle prestazioni", "Ricavi"],
        "cogs": ["Costi per materie prime e servizi"], "gross": ["Margine lordo"],
        "admin": ["Costi del personale e spese generali"],
        "other_income": ["Altri ricavi e proventi"], "operating": ["Risultato operativo"],
        "finance": ["Proventi e oneri finanziari"], "pbt": ["Risultato prima delle imposte"],
        "tax": ["Imposte sul reddito dell'esercizio"],
        "net": ["Utile (perdita) dell'esercizio", "Risultato netto dell'esercizio"],
        "assets_h": ["ATTIVO"], "nca_h": ["Immobilizzazioni"],
        "ppe": ["Immobilizzazioni materiali"], "intangibles": ["Immobilizzazioni immateriali"],
        "fin_assets": ["Immobilizzazioni finanziarie"], "nca_total": ["Totale immobilizzazioni"],
        "ca_h": ["Attivo circolante"], "inventories": ["Rimanenze"],
        "receivables": ["Crediti verso clienti"], "cash": ["Disponibilità liquide"],
        "ca_total": ["Totale attivo circolante"],
        "total_assets": ["Totale attivo", "TOTALE ATTIVO"],
        "el_h": ["PASSIVO E PATRIMONIO NETTO"], "share_capital": ["Capitale sociale"],
        "reserves": ["Riserve"], "net_bs": ["Risultato dell'esercizio"],
        "equity_total": ["Totale patrimonio netto"], "borrowings": ["Debiti verso banche"],
        "payables": ["Debiti verso fornitori"], "other_liab": ["Altri debiti"],
        "liab_total": ["Totale debiti"], "total_el": ["Totale passivo"],
    },
    "fr": {
        "revenue": ["Chiffre d'affaires", "Chiffre d'affaires net"],
        "cogs": ["Achats consommés"], "gross": ["Marge brute"],
        "admin": ["Charges externes et de personnel"],
        "other_income": ["Autres produits d'exploitation"],
        "operating": ["Résultat d'exploitation"], "finance": ["Résultat financier"],
        "pbt": ["Résultat courant avant impôts"], "tax": ["Impôts sur les bénéfices"],
        "net": ["Résultat net de l'exercice", "Bénéfice ou perte"],
        "assets_h": ["ACTIF"], "nca_h": ["Actif immobilisé"],
        "ppe": ["Immobilisations corporelles"], "intangibles": ["Immobilisations incorporelles"],
        "fin_assets": ["Immobilisations financières"], "nca_total": ["Total actif immobilisé"],
        "ca_h": ["Actif circulant"], "inventories": ["Stocks"],
        "receivables": ["Créances clients"], "cash": ["Disponibilités"],
        "ca_total": ["Total actif circulant"], "total_assets": ["Total de l'actif", "TOTAL ACTIF"],
        "el_h": ["PASSIF"], "share_capital": ["Capital social"], "reserves": ["Réserves"],
        "net_bs": ["Résultat de l'exercice"], "equity_total": ["Total capitaux propres"],
        "borrowings": ["Emprunts et dettes financières"], "payables": ["Dettes fournisseurs"],
        "other_liab": ["Autres dettes"], "liab_total": ["Total dettes"],
        "total_el": ["Total du passif", "TOTAL PASSIF"],
    },
    "de": {
        "revenue": ["Umsatzerlöse"], "cogs": ["Materialaufwand"], "gross": ["Rohergebnis"],
        "admin": ["Personal- und Verwaltungsaufwand"],
        "other_income": ["Sonstige betriebliche Erträge"], "operating": ["Betriebsergebnis"],
        "finance": ["Finanzergebnis"], "pbt": ["Ergebnis vor Steuern"],
        "tax": ["Steuern vom Einkommen und vom Ertrag"],
        "net": ["Jahresüberschuss/-fehlbetrag", "Jahresergebnis"],
        "assets_h": ["AKTIVA"], "nca_h": ["Anlagevermögen"], "ppe": ["Sachanlagen"],
        "intangibles": ["Immaterielle Vermögensgegenstände"], "fin_assets": ["Finanzanlagen"],
        "nca_total": ["Summe Anlagevermögen"], "ca_h": ["Umlaufvermögen"],
        "inventories": ["Vorräte"], "receivables": ["Forderungen aus Lieferungen und Leistungen"],
        "cash": ["Kassenbestand, Guthaben bei Kreditinstituten"],
        "ca_total": ["Summe Umlaufvermögen"], "total_assets": ["Summe Aktiva", "Bilanzsumme"],
        "el_h": ["PASSIVA"], "share_capital": ["Gezeichnetes Kapital"],
        "reserves": ["Gewinnrücklagen"], "net_bs": ["Jahresergebnis"],
        "equity_total": ["Summe Eigenkapital"],
        "borrowings": ["Verbindlichkeiten gegenüber Kreditinstituten"],
        "payables": ["Verbindlichkeiten aus Lieferungen und Leistungen"],
        "other_liab": ["Sonstige Verbindlichkeiten"], "liab_total": ["Summe Verbindlichkeiten"],
        "total_el": ["Summe Passiva"],
    },
}

TITLES = {
    "en": ["Annual Report {year}", "Financial Statements for the year ended {end}",
           "Report and Accounts {year}"],
    "it": ["Bilancio d'esercizio al {end}", "Bilancio {year}"],
    "fr": ["Comptes annuels - exercice clos le {end}", "Rapport financier annuel {year}"],
    "de": ["Jahresabschluss zum {end}", "Geschäftsbericht {year}"],
}

SECTIONS = {
    "en": {"income": ["Statement of profit or loss", "Income statement"],
           "balance": ["Statement of financial position", "Balance sheet"],
           "notes": "Notes to the financial statements", "note": "Note",
           "period": "for the year ended {end}", "as_at": "as at {end}"},
    "it": {"income": ["Conto economico"], "balance": ["Stato patrimoniale"],
           "notes": "Nota integrativa", "note": "Nota", "period": "esercizio chiuso al {end}",
           "as_at": "al {end}"},
    "fr": {"income": ["Compte de résultat"], "balance": ["Bilan"], "notes": "Annexe aux comptes",
           "note": "Note", "period": "exercice clos le {end}", "as_at": "au {end}"},
    "de": {"income": ["Gewinn- und Verlustrechnung"], "balance": ["Bilanz"],
           "notes": "Anhang", "note": "Anm.", "period": "für das Geschäftsjahr zum {end}",
           "as_at": "zum {end}"},
}

UNIT_LINES = {
    "en": {1: ["(in {cur})", "All amounts in {cur}"], 1000: ["({cur} thousands)", "{cur}'000"]},
    "it": {1: ["(importi in {cur})", "Valori espressi in {cur}"],
           1000: ["(valori in migliaia di {cur})", "(importi in {cur}/000)"]},
    "fr": {1: ["(en {cur})", "Montants exprimés en {cur}"],
           1000: ["(en milliers de {cur})", "(k{cur})"]},
    "de": {1: ["(in {cur})", "Angaben in {cur}"], 1000: ["(in T{cur})", "(in Tausend {cur})"]},
}

NOTES = {
    "en": ["The financial statements were approved by the Board of Directors on {approved} and "
           "signed on its behalf by {person}.",
           "The average number of employees during the year was {employees}.",
           "The directors propose a dividend of {dividend} per share, payable on {paydate}.",
           "Audit fees for the year amounted to {fee}.",
           "There were no significant events after the reporting period ended {end}."],
    "it": ["Il bilancio è stato approvato dal Consiglio di Amministrazione in data {approved}.",
           "Il numero medio dei dipendenti nell'esercizio è stato pari a {employees}.",
           "Si propone la distribuzione di un dividendo di {dividend} per azione, in pagamento il "
           "{paydate}.", "I compensi spettanti alla società di revisione ammontano a {fee}.",
           "Non si segnalano fatti di rilievo avvenuti dopo la chiusura dell'esercizio al {end}."],
    "fr": ["Les comptes annuels ont été arrêtés par le conseil d'administration le {approved}.",
           "L'effectif moyen de l'exercice s'élève à {employees} salariés.",
           "Il est proposé de distribuer un dividende de {dividend} par action, mis en paiement le "
           "{paydate}.", "Les honoraires des commissaires aux comptes s'élèvent à {fee}.",
           "Aucun événement significatif n'est intervenu depuis la clôture du {end}."],
    "de": ["Der Jahresabschluss wurde am {approved} von der Geschäftsführung aufgestellt.",
           "Im Geschäftsjahr waren durchschnittlich {employees} Mitarbeiter beschäftigt.",
           "Es wird eine Dividende von {dividend} je Aktie vorgeschlagen, zahlbar am {paydate}.",
           "Das Honorar des Abschlussprüfers betrug {fee}.",
           "Nach dem Abschlussstichtag {end} sind keine wesentlichen Ereignisse eingetreten."],
}
