"""The controller cluster: several controllers on every switch, one leader elected through ZooKeeper.

``roles`` is the pure OpenFlow-role logic (what to ask each switch for, what its answers mean, when this node may
write); ``zookeeper`` the coordination over kazoo (membership, election, the generation, shared jobs and view).
"""
