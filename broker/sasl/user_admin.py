"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554) as Kafka 2.8's ZkAdminManager runs them.

Users are read from and written to `/config/users/<user>` (the name sanitized as Kafka's Sanitizer does), each
write followed by the `/config/changes` notification every broker's credential cache follows. An alteration
carries the salted password the client computed (the password never reaches the broker); the broker derives
the stored and server keys from it. Per-user errors, with 2.8's codes and messages: an empty name
(UNACCEPTABLE_CREDENTIAL, RESOURCE_NOT_FOUND on describe), an unknown mechanism (UNSUPPORTED_SASL_MECHANISM),
iterations outside 4096..16384 (UNACCEPTABLE_CREDENTIAL), one (user, mechanism) twice (DUPLICATE_RESOURCE), the
deletion of a credential that does not exist (RESOURCE_NOT_FOUND).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from client.kafka import errors
from client.kafka.scram import (
    ITERATIONS_MAX,
    ITERATIONS_MIN,
    ScramCredentialError,
    credential_from_salted_password,
    desanitize_user,
    encode_credential,
    sanitize_user,
    user_credentials,
)
from client.kafka.znodes import (
    CONFIG_TYPE_USER,
    config_change_create_path,
    config_entity_path,
    decode_config,
    encode_config,
    encode_config_change,
)
from client.zk.exceptions import NoNodeError, ZkException

# Kafka's ScramMechanism.type: the byte a request names a mechanism with (0 is UNKNOWN).
MECHANISM_BY_TYPE = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_BY_MECHANISM = {name: type_ for type_, name in MECHANISM_BY_TYPE.items()}
USERS_PATH = f"/config/{CONFIG_TYPE_USER}"
USERNAME_EMPTY = "Username must not be empty"


@dataclass(frozen=True, slots=True)
class UserResult:
    user: str
    error_code: int = errors.NONE
    error_message: str | None = None
    credential_infos: tuple[tuple[int, int], ...] = ()  # (mechanism type, iterations)


async def _user_config(zk: Any, user: str) -> tuple[dict[str, str], int | None]:
    """The user's configs and the znode's version (None: no znode)."""
    path = config_entity_path(CONFIG_TYPE_USER, sanitize_user(user))
    try:
        data, stat = await zk.get(path)
    except NoNodeError:
        return {}, None
    return decode_config(data, path), stat.version


def _described(user: str, config: dict[str, str]) -> UserResult | None:
    try:
        credentials = user_credentials(config)
    except ScramCredentialError as exc:
        return UserResult(user, errors.UnknownServerError.code, str(exc))
    if not credentials:
        return None
    infos = tuple((TYPE_BY_MECHANISM[m], c.iterations) for m, c in sorted(credentials.items()))
    return UserResult(user, credential_infos=infos)


async def describe_user_scram(zk: Any, users: Sequence[str] | None) -> list[UserResult]:
    """Every user with a credential (sorted) when `users` is None or empty, else one result per named user."""
    if not users:
        try:
            names = await zk.get_children(USERS_PATH)
        except NoNodeError:
            names = []
        found = [_described(desanitize_user(n), (await _user_config(zk, desanitize_user(n)))[0]) for n in names]
        return sorted((r for r in found if r is not None), key=lambda r: r.user)
    results: list[UserResult] = []
    for user in dict.fromkeys(users):
        if not user:
            results.append(UserResult(user, errors.ResourceNotFoundError.code, USERNAME_EMPTY))
        elif users.count(user) > 1:
            message = f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
            results.append(UserResult(user, errors.DuplicateResourceError.code, message))
        else:
            result = _described(user, (await _user_config(zk, user))[0])
            missing = f"Attempt to describe a user credential that does not exist: {user}"
            results.append(result or UserResult(user, errors.ResourceNotFoundError.code, missing))
    return results


def _illegal(name: str, mechanism: int, iterations: int | None) -> tuple[int, str] | None:
    """2.8's first check of one upsertion (iterations given) or deletion (None)."""
    if not name:
        return errors.UnacceptableCredentialError.code, USERNAME_EMPTY
    if mechanism not in MECHANISM_BY_TYPE:
        return errors.UnsupportedSaslMechanismError.code, "Unknown SCRAM mechanism"
    if iterations is not None and iterations < ITERATIONS_MIN:
        return errors.UnacceptableCredentialError.code, "Too few iterations"
    if iterations is not None and iterations > ITERATIONS_MAX:
        return errors.UnacceptableCredentialError.code, "Too many iterations"
    return None


async def alter_user_scram(zk: Any, upsertions: Sequence[Any], deletions: Sequence[Any]) -> list[UserResult]:
    """Applies the request's upsertions (name, mechanism, iterations, salt, salted_password) and deletions
    (name, mechanism); one result per user, errors first as 2.8 lists them."""
    failed: dict[str, UserResult] = {}
    for item, iterations in [*((u, u.iterations) for u in upsertions), *((d, None) for d in deletions)]:
        problem = _illegal(item.name, item.mechanism, iterations)
        if problem is not None and item.name not in failed:
            failed[item.name] = UserResult(item.name, *problem)
    pairs = [(i.name, i.mechanism) for i in [*upsertions, *deletions] if i.name not in failed]
    for name, mechanism in pairs:
        if pairs.count((name, mechanism)) > 1 and name not in failed:
            message = "A user credential cannot be altered twice in the same request"
            failed[name] = UserResult(name, errors.DuplicateResourceError.code, message)
    results = list(failed.values())
    for user in dict.fromkeys(name for name, _ in pairs if name not in failed):
        results.append(
            await _alter_one(
                zk,
                user,
                [u for u in upsertions if u.name == user],
                [MECHANISM_BY_TYPE[d.mechanism] for d in deletions if d.name == user],
            )
        )
    return results


async def _alter_one(zk: Any, user: str, upsertions: Sequence[Any], deleted: Sequence[str]) -> UserResult:
    config, version = await _user_config(zk, user)
    if any(m not in config for m in deleted):
        return UserResult(
            user, errors.ResourceNotFoundError.code, "Attempt to delete a user credential that does not exist"
        )
    for mechanism in deleted:
        config.pop(mechanism)
    for upsertion in upsertions:
        mechanism = MECHANISM_BY_TYPE[upsertion.mechanism]
        credential = credential_from_salted_password(
            mechanism, bytes(upsertion.salt), bytes(upsertion.salted_password), upsertion.iterations
        )
        config[mechanism] = encode_credential(credential)
    path = config_entity_path(CONFIG_TYPE_USER, sanitize_user(user))
    try:  # conditional on the version read: a concurrent change fails this user instead of being lost
        if version is None:
            await zk.create(path, encode_config(config), makepath=True)
        else:
            await zk.set(path, encode_config(config), version)
        await zk.create(
            config_change_create_path(),
            encode_config_change(CONFIG_TYPE_USER, sanitize_user(user)),
            sequence=True,
            makepath=True,
        )
    except ZkException as exc:  # Kafka: Errors.forException of the ZooKeeper failure
        return UserResult(user, errors.UnknownServerError.code, f"{type(exc).__name__}: {exc}")
    return UserResult(user)
