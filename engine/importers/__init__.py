"""Importers: turn what other tools recorded (transcripts, message logs) into ledger sessions."""
