-- 0009: a secret per claim. Who owns a run is proven by its fencing token (id, fire_time,
-- attempt), the agent id it was claimed with, and this: a random value set by every claim and
-- reclaim and returned only to the claimer. Agent ids and fencing tokens show in logs and
-- statuses; the lease token never does, and no role but the schema's owner may read it.
-- Runs in progress during the upgrade have none: they are never renewed or completed again,
-- and are reclaimed (with a token) once their leases run out.
ALTER TABLE job_runs ADD COLUMN lease_token uuid;
