"""function-sack8s: a Crossplane composition function for OCM component versions."""
