"""How the controller talks to switches: the OpenFlow framework (framework.py: Ryu or os-ken), message encoding
and decoding, stats bytes, the LLDP loop and guard, OpenFlow error matching, the platform fixes, the sFlow
collector and decoder. Imports the lower wings (state, desired, decide) and, for the sFlow metrics, controller.web.
"""
