"""What a measurement and a run are configured with: the option table, value parsers, precedence,
run settings. Pure.
"""
