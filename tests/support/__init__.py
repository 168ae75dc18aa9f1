"""Test support: real registries and a fault-injecting proxy on loopback."""
