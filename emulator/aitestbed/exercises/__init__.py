"""Self-checking exercises from the user guide, and `make rehearse`'s scripted learner.

  catalog   the exercises: steps and which check
  checks    what each check reads on the cluster, and its hints
  probe     runs a command on a node (docker exec), so checks can be faked in tests
  session   one cluster's learners: records, start, check
  cli       `aitestbed exercise list | start NAME | check NAME [--user U]`
  rehearse  a scripted new user through onboarding and every exercise, with a report
"""
