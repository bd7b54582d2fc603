"""Pure helpers every layer uses: units formatting, quantiles, the option error type."""
