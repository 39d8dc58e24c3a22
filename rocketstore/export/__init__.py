"""Bulk exports over the store's public read API."""
