"""What is kept on disk: baseline files, environment fingerprints, results files."""
