"""Usage billing with exact money: price catalog, usage records, rating, ledger, invoice."""
