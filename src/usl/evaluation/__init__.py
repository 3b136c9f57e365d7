"""Judge evaluation: how often a judge agrees with human labels, and whether it is consistent."""
