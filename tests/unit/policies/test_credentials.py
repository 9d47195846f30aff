"""Credentials written as a label and a value, in many languages; and what only looks like one.
Values come from faker's password generator, not from examples of our own."""

from __future__ import annotations

import pytest

from policies.credentials import credentials
from policies.pii import DETECTORS

faker = pytest.importorskip("faker")


def found(text: str) -> list[str]:
    data = text.encode()
    return [data[a:b].decode() for a, b in credentials(data)]


def passwords(count: int) -> list[str]:
    fake = faker.Faker()
    fake.seed_instance(31)
    return [fake.password(length=12) for _ in range(count)]


FRAMES = [
    "username: jdoe\npassword: {}",
    "Benutzername: mmuster / Passwort: {}",
    "Identifiant : jdupont, mot de passe : {}",
    "Usuario: jperez, contraseña: {}",
    "login ana.souza senha {}".replace("senha ", "senha: "),
    "Логин: ivanov, пароль: {}",
    "ユーザー名：tanaka パスワード：{}",
    "用户名：wangwei 密码：{}",
    "아이디: kimjh 비밀번호는 {}",
    "Hasło do konta: {}",
    "my passcode is {}",
    'db:\n  user: app\n  password: "{}"',
]


@pytest.mark.parametrize("frame", FRAMES)
def test_a_labelled_password_is_found_in_any_language(frame: str) -> None:
    for value in passwords(5):
        assert value in found(frame.format(value)) or any(
            value.startswith(hit) for hit in found(frame.format(value))
        ), frame.format(value)


@pytest.mark.parametrize(
    "text",
    ["PIN 4821", "PIN: 482193", "Your PIN-Code: 7731", "пин-код 0420", "Tunnusluku: 1234"],
)
def test_a_pin_is_digits_after_its_label(text: str) -> None:
    assert found(text)


@pytest.mark.parametrize(
    "text",
    [
        "Password: required",
        "What makes a good password?",
        "password: <your-password>",
        "Passwort: ********",
        "API key: ${OPENAI_API_KEY}",
        "Reset your password at the login page",
        "the pin of the chart is 4 cm long",
        "Set the password in the environment, never in code.",
        "パスワードを忘れました",
        "password = get_password(user)",
        "password: %DB_PASS%",
    ],
)
def test_what_names_a_credential_without_holding_one_is_not(text: str) -> None:
    assert found(text) == []


def test_the_secret_detector_reads_labelled_credentials() -> None:
    assert DETECTORS["secret"]("Zugangsdaten: Kennwort = Xq7!pLm2")
