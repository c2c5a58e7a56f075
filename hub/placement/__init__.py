"""Pure placement core of the hub: a frozen capacity snapshot in, placement decisions out."""
