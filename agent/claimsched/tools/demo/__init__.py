"""`claimsched demo`: real replicas race for every occurrence; one is killed, one paused; a verdict.

- `app`: the jobs every replica runs (`claimsched agent claimsched.tools.demo.app:agent`);
- `fleet`: the replicas' processes, started, signalled and stopped;
- `observations`: what the replicas' log lines say (who started, what was refused);
- `scenario`: the faults (a SIGKILL mid-run, a SIGSTOP past the lease, a SIGCONT);
- `verdict`: what the database shows at the end;
- `view`: the live view and the verdict, drawn with rich;
- `runner`: the demo itself, tying these together.

Nothing is imported here: a replica imports `app` alone, without rich.
"""
