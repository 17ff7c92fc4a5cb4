"""What the controller knows: the topology and its tiers, the flows it counts and their rates, link loads,
declared jobs, switch capabilities. Imports nothing else of the controller (the bottom of the house).
"""
