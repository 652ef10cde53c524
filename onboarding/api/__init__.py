"""The onboarding API: the operators' endpoints (``views``) and the node-facing ones (``node``),
their shapes (``serializers``) and routes (``urls``)."""
