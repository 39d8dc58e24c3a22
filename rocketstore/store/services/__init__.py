"""The store's background services, one per module, each a ServiceThread."""
