"""Workshops: a classroom of learners on one testbed (`aitestbed classroom`, `aitestbed load`).

roster     who is in the room (names, uids, the project), decided purely, kept in
           the cluster's state directory (classroom/room.json)
otp        each learner's token as an otpauth:// URI and a QR code
sheets     a printable page per learner
room       create, sheets, begin, reset, destroy: the account playbooks and the nodes
snapshot   what the instructor's page shows, read as root from the exercise checks' sources:
           the one name of its parts, each a module of its own:
  collect    where to read, one root command per node and cycle -> Raw (the I/O)
  parse      each section's text -> records (Slurm's through node/slurm_text)
  judge      a learner's evidence -> each exercise's status (pure)
  panels     a panel per system (pure)
  summary    Raw, room, load, records -> Page (pure)
  page       the Page as data
  watcher    the thread that takes a new Page every few seconds
web        the instructor's page (Flask)
load       other users' jobs on each system (`aitestbed load start|stop`)
"""
