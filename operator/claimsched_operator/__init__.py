"""claimsched's Kubernetes operator: ClaimSchedules in, job_schedule rows and status out."""

from .settings import OperatorSettings

__all__ = ["OperatorSettings"]
