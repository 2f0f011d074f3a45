"""What tests use and the installed package does not: tiny random models of the local
providers' classes, the generators of the documentation's figures, browser helpers."""
