"""Pure admission engine: a frozen cluster snapshot and `now` in, admission decisions out."""
