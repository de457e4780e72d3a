"""The loop: owns every I/O call and the clock, and moves data one step right through the flow
(scrape -> target state -> judge and plan -> alert state -> publish -> outputs).

May import everything below the command line.
"""
