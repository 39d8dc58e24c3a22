"""The native-free vocabulary every layer may import."""
