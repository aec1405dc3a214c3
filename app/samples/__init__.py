"""Sample invoices, contracts and a financial statement for `quire up --samples`."""
