"""Mininet topologies (``mn --custom mininet_topos/<file>.py --topo ...``) and the pieces experiments share."""
