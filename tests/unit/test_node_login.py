"""node/login: the one builder of `runuser -l` command lines."""

import shlex

from aitestbed.node.login import as_login, as_login_line


def test_a_command_runs_in_the_users_login_shell():
    assert as_login("alice", "echo $USER") == ["runuser", "-l", "alice", "-c", "echo $USER"]


def test_without_a_command_it_is_the_login_shell_itself():
    assert as_login("alice") == ["runuser", "-l", "alice"]
    assert as_login("alice", "") == ["runuser", "-l", "alice", "-c", ""]


def test_the_line_form_quotes_each_word_and_splits_back_to_the_argv():
    command = "cd ~/runs && sbatch --wrap 'sleep 1' # $HOME"
    line = as_login_line("load0", command)
    assert line == f"runuser -l load0 -c {shlex.quote(command)}"
    assert shlex.split(line) == as_login("load0", command)
    assert as_login_line("o'brien", "id") == "runuser -l 'o'\"'\"'brien' -c id"
