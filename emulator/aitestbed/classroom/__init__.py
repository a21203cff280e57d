"""Workshops: a classroom of learners on one testbed (`aitestbed classroom`, `aitestbed load`).

roster     who is in the room (names, uids, the project), decided purely, kept in
           the cluster's state directory (classroom/room.json)
otp        each learner's token as an otpauth:// URI and a QR code
sheets     a printable page per learner
room       create, sheets, begin, reset, destroy: the account playbooks and the nodes
snapshot   what the instructor's page shows, read as root from the exercise checks' sources
web        the instructor's page (Flask)
load       other users' jobs on each system (`aitestbed load start|stop`)
"""
