"""The far ends a check can measure against, behind one contract (interface.py) and one
ordered registry (registry.py); one module per far end."""
