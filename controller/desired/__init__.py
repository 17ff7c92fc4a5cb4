"""What the switches should hold: rules as values, the forwarding baseline, the traffic-engineering layer's rules,
the incremental plan and the diff against what is installed. Imports only controller.state.
"""
