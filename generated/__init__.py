"""Low-level clients generated from specs/ by `make regen`; never edited by hand."""
