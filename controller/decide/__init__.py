"""What the controller decides: the TE decision, the worker that runs it, packet-in decisions, decision requests
and host ageing. Imports controller.state and controller.desired.
"""
