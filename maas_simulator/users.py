"""API users and their tokens, and the region's event log (docs/maas-api.md §1.1, §6)."""

from __future__ import annotations

from dataclasses import dataclass, field

LEVELS = {"AUDIT": 0, "DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}


@dataclass
class Token:
    consumer_key: str
    token_key: str
    token_secret: str
    name: str = "MAAS consumer"


@dataclass
class User:
    username: str
    is_superuser: bool
    consumer_key: str
    token_key: str
    token_secret: str
    email: str = ""
    tokens: list[Token] = field(default_factory=list)  # minted with create_authorisation_token
    deleted_keys: set[str] = field(default_factory=set)  # token keys deleted (the first one too)
    first_token_name: str = "MAAS consumer"  # noqa: S105 (a consumer name)

    @property
    def api_key(self) -> str:
        return f"{self.consumer_key}:{self.token_key}:{self.token_secret}"

    def all_tokens(self) -> list[Token]:
        """Every live token, the one the user was created with first."""
        first = Token(self.consumer_key, self.token_key, self.token_secret, self.first_token_name)
        return [t for t in (first, *self.tokens) if t.token_key not in self.deleted_keys]


@dataclass
class SSHKey:
    id: int
    username: str  # its owner
    key: str


@dataclass
class Event:
    id: int
    system_id: str
    hostname: str
    username: str
    level: str
    created: float
    type: str
    description: str
    action: str = ""  # shown as the machine's status_action

    @property
    def message(self) -> str:
        return f"{self.type} - {self.description}" if self.description else self.type
