from controller.routing.optimisers.base import Problem

def optimise(fabric, flows, **kw):
    raise NotImplementedError
