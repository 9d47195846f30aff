"""Credentials written as a label and a value, in any of some forty languages (pure): "password:
hunter2!", "Passwort: Sommer2024", "mot de passe : azerty12", "PIN 4821", "パスワード：abc123",
"비밀번호는 qwer1234", "my passcode is 99lions".

A form, a chat or a pasted config names a credential by a word in its own language; what
follows the word and a separator is the value (policies/labelled.py). The value must look like
one: not a stand-in (a word, a mask, a name in brackets, a variable), digits for a PIN. A plain
word is not taken ("Password: required" in documentation), so a credential that is a dictionary
word is missed: the price of not refusing every form's help text.

RE2, case-insensitive in every script (so the scan stays linear in the text).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from policies.labelled import QUOTES, SEPARATOR_OR_SPACE, labelled
from policies.re2text import spans

_SECRET_LABELS = (
    # English
    "password", "passwd", "pwd", "passcode", "passphrase", "pass word", "security code",
    "access code", "one-time code", "one time code", "otp", "login code", "secret key",
    "client secret", "api key", "api-key", "apikey", "access key", "auth token",
    "access token", "bearer token", "refresh token", "recovery code", "backup code",
    # Germanic
    "passwort", "kennwort", "zugangscode", "geheimzahl", "wachtwoord", "toegangscode",
    "lösenord", "adgangskode", "kodeord", "passord", "lykilorð",
    # Romance
    "mot de passe", "mdp", "code secret", "code d'accès", "clé api", "contraseña", "clave",
    "clave de acceso", "código de seguridad", "código de acceso", "senha", "palavra-passe",
    "código de acesso", "parola d'ordine", "codice segreto", "codice di accesso", "parolă",
    "parola",
    # Slavic, Baltic, Finno-Ugric, Greek, Turkish
    "пароль", "парола", "код доступа", "hasło", "heslo", "lozinka", "geslo", "slaptažodis",
    "parole", "salasana", "jelszó", "salasõna", "κωδικός", "κωδικός πρόσβασης", "şifre",
    # Semitic, Iranian, Indic, South-East Asian
    "סיסמה", "סיסמא", "كلمة المرور", "كلمة السر", "الرقم السري", "رمز عبور", "گذرواژه",
    "पासवर्ड", "कूटशब्द", "রহস্যশব্দ", "পাসওয়ার্ড", "รหัสผ่าน", "mật khẩu", "kata sandi",
    "kata laluan",
    # CJK
    "パスワード", "暗証番号", "認証コード", "密码", "密碼", "口令", "验证码", "驗證碼",
    "비밀번호", "암호", "패스워드", "인증번호",
)  # fmt: skip
_PIN_LABELS = (
    "pin", "pin code", "pin-code", "pincode", "pin number", "pinkod", "pin-koodi", "kod pin",
    "code pin", "código pin", "codice pin", "пин", "пин-код", "пин код", "tunnusluku",
)  # fmt: skip
_SECRET = labelled(_SECRET_LABELS, rf"[^\s{QUOTES},;]{{4,128}}")
_PIN = labelled(_PIN_LABELS, r"\d{4,12}", SEPARATOR_OR_SPACE)


_STAND_INS = ("password", "passwd", "secret", "changeme", "example", "your", "xxx", "...")
_REFERENCE = re.compile(
    r"\$\{.*\}|\$[A-Za-z_]\w*|%\w+%|\{\{.*\}\}|[A-Za-z_][\w.]*\(.*\)"
    r"|[A-Za-z_]\w*(?:\.\w+)+[(\[].*|[A-Za-z]+(?:_[A-Za-z]+)+"
)
_BRACKETS = (("<", ">"), ("[", "]"), ("{", "}"), ("(", ")"))


def stands_in(value: str) -> bool:
    """A value documentation shows in place of a credential, or a reference to one: a word
    ("required", "changeme"), a mask ("****"), a name in brackets ("<your-password>"), a
    variable ("${DB_PASSWORD}", "%PASS%", "api_key"), a call or a lookup ("get_password()",
    "os.environ[", where a quote ends the value). A real
    password may hold any of these characters: only the whole value's shape counts."""
    lowered = value.lower()
    return (
        len(set(value)) <= 2
        or value.isalpha()
        or any(word in lowered for word in _STAND_INS)
        or any(value[0] == a and value[-1] == b for a, b in _BRACKETS)
        or _REFERENCE.fullmatch(value) is not None
    )


def credentials(data: bytes) -> Iterator[tuple[int, int]]:
    """Where labelled credentials are in `data` (UTF-8)."""
    for start, end in spans(_SECRET, data):
        if not stands_in(data[start:end].decode("utf-8", "replace").rstrip(".")):
            yield start, end
    yield from spans(_PIN, data)
