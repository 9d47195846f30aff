"""Requests with and without personal data for the privacy detectors, made by faker 40.63 in 32
locales (seeded: the same bytes on every run) and split by a hash of the id, about 80/20, into
bench/data/generated_pii.{tune,report}.jsonl.    .venv/bin/python -m bench.privacy_generated
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections import Counter
from datetime import date, datetime
from pathlib import Path
from random import Random
from typing import Any

from faker import Faker
from num2words import CONVERTER_CLASSES, num2words  # type: ignore[import-untyped]

SEED, MODEL, CUT = 20261128, "gpt-4o-mini", "\x00"  # CUT: where a value is split in two
OUT, PII, CLEAN = Path(__file__).resolve().parent / "data", 36, 18  # rows per language
LOCALES = "ja_JP zh_CN zh_TW ko_KR ru_RU uk_UA el_GR he_IL ar_AA ar_SA hi_IN th_TH fa_IR bg_BG"
LOCALES += " de_DE fr_FR es_ES it_IT pt_BR nl_NL pl_PL sv_SE da_DK tr_TR vi_VN id_ID cs_CZ hu_HU"
LOCALES += " fi_FI en_US en_GB en_IN"
IDS = "zh_CN zh_TW ko_KR ru_RU uk_UA el_GR he_IL th_TH fr_FR it_IT nl_NL pl_PL sv_SE tr_TR hu_HU"
IDS += " fi_FI en_US en_GB de_DE:rvnr es_ES:nif pt_BR:cpf cs_CZ:birth_number en_IN:aadhaar_id"
ID_METHOD = {p[:5]: p[6:] or "ssn" for p in IDS.split()}  # the national id faker has there
FIELDS = "name email phone address card id passport dob password plate salary check who"
TABLE = """
@en=Name|Email|Phone|Address|Card number|ID number|Passport no.|Date of birth|Password|Licence
 plate|Salary|Please check this record:|Who was {}?@de=Name|E-Mail|Telefon|Anschrift|Kartennummer|
Rentenversicherungsnr.|Reisepassnr.|Geburtsdatum|Passwort|Kennzeichen|Gehalt|Bitte prüfe diesen
 Datensatz:|Wer war {}?@fr=Nom|E-mail|Téléphone|Adresse|N° de carte|N° de sécurité sociale|N° de
 passeport|Date de naissance|Mot de passe|Immatriculation|Salaire|Vérifie cette fiche :|Qui était
 {} ?@es=Nombre|Correo|Teléfono|Dirección|N.º de tarjeta|NIF|N.º de pasaporte|Fecha de nacimiento|
Contraseña|Matrícula|Salario|Revisa este registro:|¿Quién fue {}?@it=Nome|E-mail|Telefono|
Indirizzo|N. carta|Codice fiscale|N. passaporto|Data di nascita|Password|Targa|Stipendio|Controlla
 questo record:|Chi era {}?@pt=Nome|E-mail|Telefone|Endereço|N.º do cartão|CPF|N.º do passaporte|
Data de nascimento|Senha|Placa|Salário|Verifique este registro:|Quem foi {}?@nl=Naam|E-mail|
Telefoon|Adres|Kaartnummer|BSN|Paspoortnummer|Geboortedatum|Wachtwoord|Kenteken|Salaris|Controleer
 dit record:|Wie was {}?@pl=Imię i nazwisko|E-mail|Telefon|Adres|Nr karty|PESEL|Nr paszportu|Data
 urodzenia|Hasło|Nr rejestracyjny|Wynagrodzenie|Sprawdź ten rekord:|Kim był {}?@sv=Namn|E-post|
Telefon|Adress|Kortnummer|Personnummer|Passnummer|Födelsedatum|Lösenord|Registreringsnummer|Lön|
Kontrollera posten:|Vem var {}?@da=Navn|E-mail|Telefon|Adresse|Kortnummer|CPR-nummer|Pasnummer|
Fødselsdato|Adgangskode|Nummerplade|Løn|Tjek denne post:|Hvem var {}?@tr=Ad Soyad|E-posta|Telefon|
Adres|Kart no|T.C. Kimlik No|Pasaport no|Doğum tarihi|Şifre|Plaka|Maaş|Bu kaydı kontrol et:|{}
 kimdi?@vi=Họ tên|Email|Điện thoại|Địa chỉ|Số thẻ|Số CCCD|Số hộ chiếu|Ngày sinh|Mật khẩu|Biển số
 xe|Lương|Hãy kiểm tra bản ghi này:|{} là ai?@id=Nama|Email|Telepon|Alamat|Nomor kartu|NIK|No.
 paspor|Tanggal lahir|Kata sandi|Pelat nomor|Gaji|Periksa data ini:|Siapa {}?@cs=Jméno|E-mail|
Telefon|Adresa|Číslo karty|Rodné číslo|Číslo pasu|Datum narození|Heslo|SPZ|Plat|Zkontroluj tento
 záznam:|Kdo byl {}?@hu=Név|E-mail|Telefon|Cím|Kártyaszám|Személyi azonosító|Útlevélszám|Születési
 dátum|Jelszó|Rendszám|Fizetés|Ellenőrizd ezt a rekordot:|Ki volt {}?@fi=Nimi|Sähköposti|Puhelin|
Osoite|Kortin numero|Henkilötunnus|Passin numero|Syntymäaika|Salasana|Rekisterinumero|Palkka|
Tarkista tämä tietue:|Kuka oli {}?@ru=Имя|Эл. почта|Телефон|Адрес|Номер карты|ИНН|Номер паспорта|
Дата рождения|Пароль|Госномер|Зарплата|Проверь эту запись:|Кем был {}?@uk=Ім'я|Ел. пошта|Телефон|
Адреса|Номер картки|ІПН|Номер паспорта|Дата народження|Пароль|Номерний знак|Зарплата|Перевір цей
 запис:|Ким був {}?@bg=Име|Имейл|Телефон|Адрес|Номер на карта|ЕГН|Паспорт №|Дата на раждане|Парола|
Рег. номер|Заплата|Провери този запис:|Кой е бил {}?@el=Όνομα|Email|Τηλέφωνο|Διεύθυνση|Αριθμός
 κάρτας|ΑΜΚΑ|Αρ. διαβατηρίου|Ημερομηνία γέννησης|Κωδικός|Πινακίδα|Μισθός|Έλεγξε αυτή την εγγραφή:|
Ποιος ήταν ο {};@he=שם|דוא"ל|טלפון|כתובת|מספר כרטיס|תעודת זהות|מספר דרכון|תאריך לידה|סיסמה|מספר
 רכב|משכורת|בדוק את הרשומה:|מי היה {}?@ar=الاسم|البريد الإلكتروني|الهاتف|العنوان|رقم البطاقة|رقم
 الهوية|رقم جواز السفر|تاريخ الميلاد|كلمة المرور|رقم اللوحة|الراتب|راجع هذا السجل:|من كان {}؟@
fa=نام|ایمیل|تلفن|نشانی|شماره کارت|کد ملی|شماره گذرنامه|تاریخ تولد|رمز عبور|پلاک خودرو|حقوق|این
 رکورد را بررسی کن:|{} چه کسی بود؟@hi=नाम|ईमेल|फ़ोन|पता|कार्ड नंबर|आधार नंबर|पासपोर्ट नंबर|
जन्मतिथि|पासवर्ड|वाहन नंबर|वेतन|इस रिकॉर्ड की जाँच करें:|{} कौन थे?@th=ชื่อ|อีเมล|โทรศัพท์|ที่อยู่|
หมายเลขบัตร|เลขประจำตัวประชาชน|เลขที่หนังสือเดินทาง|วันเกิด|รหัสผ่าน|ทะเบียนรถ|เงินเดือน|
ช่วยตรวจสอบข้อมูลนี้:|{} คือใคร?@ja=氏名|メールアドレス|電話番号|住所|カード番号|個人番号|旅券番号|
生年月日|パスワード|ナンバー|給与|このレコードを確認してください：|{}とは誰ですか？@zh=姓名|
电子邮箱|电话|地址|卡号|身份证号|护照号码|出生日期|密码|车牌号|工资|请检查这条记录：|{}是谁？@
zh_TW=姓名|電子郵件|電話|地址|卡號|身分證字號|護照號碼|出生日期|密碼|車牌號碼|薪資|
請檢查這筆資料：|{}是誰？@ko=이름|이메일|전화번호|주소|카드 번호|주민등록번호|여권 번호|생년월일|
비밀번호|차량 번호|급여|이 레코드를 확인해 주세요:|{}은(는) 누구였나요?
"""
PARTS = [b.partition("=") for b in TABLE.replace("\n", "").split("@")[1:]]
TEXT = {k: dict(zip(FIELDS.split(), v.split("|"), strict=True)) for k, _, v in PARTS}
FIXED = """Marie Curie=1867-11-07;孙中山=1866-11-12;Sun Yat-sen=1866-11-12;紫式部=c. 973;Александр
 Пушкин=1799-06-06;Sherlock Holmes=1854-01-06;Albert Einstein=1879-03-14;महात्मा गांधी=1869-10-02;
Leonardo da Vinci=1452-04-15;William Shakespeare=1564-04-26;Nelson Mandela=1918-07-18;孔子=551 BC;
Napoléon Bonaparte=1769-08-15;Лев Толстой=1828-09-09;ابن سينا=c. 980;حافظ شیرازی=c. 1325;Mustafa
 Kemal Atatürk=1881-05-19;Miguel de Cervantes=1547-09-29;Hans Christian Andersen=1805-04-02;
Fryderyk Chopin=1810-03-01;세종대왕=1397-05-15;Hồ Chí Minh=1890-05-19;李白=701;Тарас
 Шевченко=1814-03-09;Όμηρος=8th c. BC;Astrid Lindgren=1907-11-14;Jean Sibelius=1865-12-08;
Kartini=1879-04-21;葛飾北斎=1760-10-31;Rabindranath Tagore=1861-05-07;Karel Čapek=1890-01-09@Eiffel
 Tower=48.8584, 2.2945;Great Pyramid of Giza=29.9792, 31.1342;Statue of Liberty=40.6892, -74.0445;
Taj Mahal=27.1751, 78.0421;Sydney Opera House=-33.8568, 151.2153;Colosseum=41.8902, 12.4922;Tokyo
 Tower=35.6586, 139.7454;Brandenburger Tor=52.5163, 13.3777;Hagia Sophia=41.0086, 28.9802;Cristo
 Redentor=-22.9519, -43.2105@password=<your-password>;api_key=changeme;token=********;
db_password=${DB_PASSWORD};password=os.environ["DB_PASSWORD"];api_key=os.getenv('API_KEY');
password=<REDACTED>@4242 4242 4242 4242;4111 1111 1111 1111;5555 5555 5555 4444@E11.9;F32.1;J45.9;
I10;C50.9;B20;F20.0;G40.9;K50.9;F31.0@metformin 500 mg;sertraline 50 mg;salbutamol;ramipril 5 mg;
tamoxifen 20 mg;dolutegravir;olanzapine 10 mg;levetiracetam;mesalazine;lithium 400 mg;insulin
 glargine;epoetin alfa@info;support;press;sales;privacy;noreply"""
PEOPLE, LANDMARKS, DUMMIES, CARDS, ICD10, MEDS, ROLES = (
    [p.split("=") for p in s.split(";")] for s in FIXED.replace("\n", "").split("@")
)
GENS = "person=name,random_int email=free_email phone=phone_number street_address=address iban=iban"
GENS += " payment_card=credit_card_number national_id= passport=passport_number date_of_birth=date"
GENS += " ip_address=ipv4_public/ipv6 secret=password/numerify/sha1 licence_plate=license_plate"
GENS += " device_id=mac_address/numerify location=local_latlng medical=fixed:icd10,drugs"
GEN = dict(g.split("=") for g in GENS.split())  # class -> faker generators ("" for national ids)
CLEAN_GEN = "company fixed:test_cards sha1,uuid4 bothify,ean13,pricetag isbn13,bothify random_int"
CLEAN_GEN += " fixed:people fixed:landmarks fixed:placeholders fixed:rfc5737,rfc3849"
SHAPES = "chat_user chat_history chat_parts completions_prompt responses_input form embeddings"
SHAPES += " email_signature tool_result json_record csv_rows log_lines config_file"  # 8: texty
NATIVE = {"street_address": "address", "phone": "phone_number", "licence_plate": "automotive"}
NATIVE["national_id"] = "national_id"  # a locale in ID_METHOD
ESC = json.JSONEncoder(ensure_ascii=False).encode  # JSON with non-ASCII kept as it is
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
KEYS = "id endpoint body pii classes lang shape source".split()
Body = tuple[str, dict[str, Any]]
ASSISTANT_OK = {"role": "assistant", "content": "OK."}
DIGITS = {"ar": 0x660, "fa": 0x6F0, "hi": 0x966, "th": 0xE50}  # the rest: fullwidth, 0xFF10


def facts(f: Faker, loc: str, t: dict[str, str], rng: Random) -> dict[str, list[str]]:
    """One value of each class, as "key|label|value" lines; a row keeps one to three classes."""
    home = f.local_latlng(loc[-2:], True) or f.location_on_land(True)
    lat, lon = (float(x) + rng.uniform(-0.02, 0.02) for x in home[:2])
    born = f.date_between_dates(date(1940, 1, 1), date(2006, 12, 31))
    dob = born.strftime(rng.choice(["%Y-%m-%d", "%d.%m.%Y", "%d/%m/%Y"]))
    who = f"{f.first_name()} {f.last_name()}" if loc in ("hi_IN", "th_TH") else f.name()
    pay = f"{f.random_int(18, 160) * 1000:,}"  # a year's salary, in no currency in particular
    device = [f"mac|MAC|{f.mac_address()}", f"imei|IMEI|{f.numerify('35' + '#' * 13)}"]
    secret = [f"password|{t['password']}|{f.password(14)}", f"pin|PIN|{f.numerify('####')}"]
    secret += [f"api_key|API key|sk-{f.password(40, False)}", f"token|Token|{f.sha1()}"]
    found = {
        "person": [f"full_name|{t['name']}|{who}", f"salary|{t['salary']}|{pay}"],
        "email": [f"email|{t['email']}|{f.free_email()}"],
        "phone": [f"phone|{t['phone']}|{f.phone_number()}"],
        "street_address": [f"address|{t['address']}|{f.address()}"],
        "iban": [f"iban|IBAN|{f.iban()}"],
        "payment_card": [f"card_number|{t['card']}|{f.credit_card_number()}"],
        "national_id": [f"national_id|{t['id']}|{getattr(f, ID_METHOD.get(loc, 'ssn'))()}"],
        "passport": [f"passport_no|{t['passport']}|{f.passport_number()}"],
        "date_of_birth": [f"date_of_birth|{t['dob']}|{dob}"],
        "ip_address": [f"ip|IP|{f.ipv4_public() if rng.random() < 0.7 else f.ipv6()}"],
        "secret": [rng.choice(secret)],
        "licence_plate": [f"licence_plate|{t['plate']}|{f.license_plate()}"],
        "device_id": [device[rng.random() < 0.4]],
        "location": [f"home_gps|{t['address']} (GPS)|{lat:.6f}, {lon:.6f}"],
        "medical": [f"diagnosis|ICD-10|{rng.choice(ICD10)[0]}", f"drug|Rx|{rng.choice(MEDS)[0]}"],
    }
    return {c: [f"{c}|{v}".replace("\n", ", ") for v in vs] for c, vs in found.items()}


def vary(item: str, lang: str, rng: Random) -> str:
    """Another way to write a value: digits in words, e-mail in words, other digits, two halves."""
    (cls, *_), (head, v), r = item.split("|"), item.rsplit("|", 1), rng.random()
    if cls == "email" and r < 0.4:
        at, dot = rng.choice([(" at ", " dot "), (" [at] ", " [dot] "), ("(at)", "(dot)")])
        v = v.replace("@", at).replace(".", dot)
    elif cls in ("phone", "national_id") and r < 0.2 and lang in CONVERTER_CLASSES:
        v = " ".join(num2words(int(c), lang=lang) if c.isdigit() else c for c in v if c.isalnum())
    elif cls in ("phone", "national_id", "payment_card", "date_of_birth") and r < 0.35:
        v = "".join(chr(DIGITS.get(lang, 0xFF10) + int(c)) if c.isdigit() else c for c in v)
    elif cls in ("phone", "iban", "payment_card", "street_address", "national_id") and r < 0.5:
        mid = len(v) // 2
        cut = min([i for i, c in enumerate(v) if c in " -,"] or [mid], key=lambda i: abs(i - mid))
        v = v[:cut].rstrip(" ,") + CUT + v[cut:].lstrip(" ,-")
    return f"{head}|{v}"


def clean(kind: int, f: Faker, t: dict[str, str], rng: Random) -> tuple[str, list[str]]:
    """A near miss with nothing personal in it: its intro and "|key|label|value" lines."""
    ex, n = f"example.{rng.choice(['com', 'org', 'net'])}", rng.randint(1, 254)
    ver = f"{rng.randint(0, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 20)}"
    ip = rng.choice(["192.0.2.", "198.51.100.", "203.0.113.", "2001:db8::"]) + str(n)
    (who, born), (place, gps), (key, dummy) = (rng.choice(x) for x in (PEOPLE, LANDMARKS, DUMMIES))
    a, b, role = f.random_int(10**7, 10**11), f.random_int(10**5, 10**9), rng.choice(ROLES)[0]
    order = f.bothify("ORD-####-????", letters="ABCDEFGHJKLMNPRSTUVWXYZ")
    sha, uuid, isbn, price = f.sha1(), f.uuid4(), f.isbn13(), f"{f.pricetag()} × {n}"
    kinds = [
        [f"company||{f.company()}", f"email|{t['email']}|{role}@{ex}", f"url|URL|https://{ex}/"],
        [f"card_number|{t['card']}|{rng.choice(CARDS)[0]} (TEST)", "mode|mode|test"],
        [f"version|Version|{ver}", f"commit|commit|{sha}", f"request_id|request id|{uuid}"],
        [f"order|Order|{order}", f"ean|EAN|{f.ean13()}", f"price||{price}"],
        [f"isbn|ISBN|{isbn}", f"parcel|Tracking|{f.bothify('1Z###?##########')}"],
        [f"sum||{a} × {b} = {a * b}"],
        [f"name|{t['name']}|{who}", f"born|{t['dob']}|{born}"],
        [f"landmark|{place}|{gps}"],
        [f"{key}|{t['password'] if 'pass' in key else key}|{dummy}", f"host|host|db.{ex}"],
        [f"server_ip|IP|{ip}", f"version|Version|{ver}"],
    ]
    return t["who"].format(who) if kind == 6 else t["check"], ["|" + s for s in kinds[kind]]


def user(content: object) -> dict[str, Any]:
    return {"role": "user", "content": content}


def build(shape: str, t: dict[str, str], ask: str, items: list[str], f: Faker, rng: Random) -> Body:
    """A request body of that shape, with the ask and the items in it."""
    rows = [s.split("|", 3)[1:] for s in items]
    lines = [f"{label}: {v}" if label else v for _, label, v in rows]
    text, record = "\n".join(lines), {k: v.replace(CUT, "") for k, _, v in rows}
    flat, r, r2 = f"{ask}\n{text}".replace(CUT, "\n"), rng.random(), rng.random()
    call: dict[str, Any] = {"id": "call_" + f.hexify("^" * 24), "type": "function"}
    call["function"] = {"name": "lookup", "arguments": json.dumps({"id": f.bothify("REC-######")})}
    said = {"role": "tool", "tool_call_id": call["id"], "content": ESC(record)}
    asked = {"role": "assistant", "content": None, "tool_calls": [call]}
    chats = {
        "chat_user": [user(flat if r < 0.6 else f"{ask} " + "; ".join(lines).replace(CUT, " "))],
        "chat_parts": [user([{"type": "text", "text": p} for p in [ask, *text.split(CUT)]])],
        "chat_history": [SYSTEM, user(text.replace(CUT, "\n")), ASSISTANT_OK, user(ask)],
        "tool_result": [user(ask), asked, said],
    }
    if shape in chats:
        return "chat", {"model": MODEL, "messages": chats[shape]}
    if shape == "embeddings":
        return "embeddings", {"model": MODEL, "input": [ask, *"; ".join(lines).split(CUT)]}
    if shape == "responses_input":
        parts = [user([{"type": "input_text", "text": flat}])]
        return "responses", {"model": MODEL, "input": flat if r < 0.5 else parts}
    if shape == "completions_prompt":
        return "completions", {"model": MODEL, "prompt": flat + "\n"}
    quoted = {k: ESC(v) if " " in v else v for k, v in record.items()}
    table = io.StringIO()
    head = [label or k for k, label, _ in rows]
    csv.writer(table, lineterminator="\n").writerows([head, record.values()])
    at = str(f.date_time_between_dates(datetime(2024, 1, 1), datetime(2025, 12, 31)))[:19]
    log = f"{at} INFO {f.uri_path(2)} " + " ".join(f"{k}={v}" for k, v in quoted.items())
    yaml = "".join(f"  {k}: {ESC(v)}\n" for k, v in record.items())
    docs = {
        "json_record": "```json\n" + json.dumps(record, ensure_ascii=False, indent=2) + "\n```",
        "csv_rows": table.getvalue(),
        "log_lines": f"{log}\n{at} WARN req={f.uuid4()[:8]} retry=1 status=503\n",
        "config_file": "".join(f"{k.upper()}={v}\n" for k, v in quoted.items()),
        "email_signature": f"--\n{text}\n{f.job()}\n{f.company()}",
        "form": text,
    }
    doc = docs[shape] if shape != "config_file" or r < 0.5 else f"record:\n{yaml}"
    body = f"{ask}\n\n{doc}".replace(CUT, "\n")
    wrap: list[tuple[str, dict[str, Any]]] = [("chat", {"messages": [user(body)]})]
    wrap += [("responses", {"input": body}), ("completions", {"prompt": body})]
    endpoint, rest = wrap[(r2 > 0.6) + (r2 > 0.8)]
    return endpoint, {"model": MODEL, **rest}


def generate() -> list[dict[str, Any]]:
    """Every row, language by language: first the ones with personal data, then the clean ones."""
    Faker.seed(SEED)
    rng, rows = Random(SEED), list[dict[str, Any]]()
    fakers = {loc: Faker(loc) for loc in LOCALES.split()}
    own: dict[str, list[str]] = {}  # the classes each locale has a generator of its own for
    for loc, f in fakers.items():
        mods = {n.split(".")[2]: n[-5:] for n in (type(p).__module__ for p in f.get_providers())}
        mine = {k for k, m in mods.items() if m == loc or m[:2] == loc[:2] != "en"} | {"any"}
        mine |= {"national_id"} if loc in ID_METHOD else set()
        own[loc] = [c for c in GEN if NATIVE.get(c, "any") in mine]
    for li, lang in enumerate(dict.fromkeys(loc[:2] for loc in fakers)):
        locs = [loc for loc in fakers if loc[:2] == lang]
        ours = [c for c in GEN if any(c in own[loc] for loc in locs)]  # classes, in turn
        for k in range(PII + CLEAN):
            cls, shape = ours[(k + li) % len(ours)], SHAPES.split()[(k * 5 + li) % 13]
            able = [loc for loc in locs if cls in own[loc] or k >= PII]  # locales that make it
            loc = able[k // len(ours) % len(able)] if k < PII else locs[k % len(locs)]
            f, t, kind = fakers[loc], TEXT.get(loc, TEXT[lang]), (k + li) % 10
            if k < PII:
                found = facts(f, loc, t, rng)
                named = cls in ("medical", "location", "date_of_birth") or rng.random() < 0.3
                items = found["person"][:1] if named and cls != "person" else []
                items += found[cls]
                extra = [c for c in own[loc] if c not in ("person", "medical", cls)]
                items += found[rng.choice(extra)] if rng.random() < 0.3 else []
                intro = t["check"]
            else:
                intro, items = clean(kind, f, t, rng)
            if shape in SHAPES.split()[:8]:
                items = [vary(s, lang, rng) for s in items]
            endpoint, body = build(shape, t, intro, items, f, rng)
            text = ESC(body)  # each value or half of one is in it: as is, in JSON (in JSON), in CSV
            for p in [p for s in items if s[0] != "|" for p in s.split("|", 3)[3].split(CUT)]:
                assert any(ESC(x)[1:-1] in text for x in (p, ESC(p)[1:-1], p.replace('"', '""')))
            classes = sorted({s.split("|")[0] for s in items} - {""})
            gens = [GEN[c] or ID_METHOD[loc] for c in classes] or [CLEAN_GEN.split()[kind]]
            row = (f"gen-{loc}-{len(rows):04d}", endpoint, body, k < PII, classes, lang, shape)
            rows.append(dict(zip(KEYS, (*row, f"faker {loc} {' '.join(gens)}"), strict=True)))
    return rows


def main() -> None:
    rows = generate()
    assert len({r["id"] for r in rows}) == len(rows)
    report = {r["id"] for r in rows if hashlib.sha256(r["id"].encode()).digest()[0] % 5 == 0}
    for split in ("tune", "report"):
        part = [r for r in rows if (r["id"] in report) == (split == "report")]
        lines = [json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in part]
        assert [json.loads(line) for line in lines] == part
        (OUT / f"generated_pii.{split}.jsonl").write_text("".join(lines), encoding="utf-8")
        print(f"{split}: {len(part)} rows, {sum(r['pii'] for r in part)} with personal data")
        for field in ("classes", "lang", "shape", "endpoint"):
            got = [v for r in part for v in (r[field] if field == "classes" else [r[field]])]
            print(f"  {field}: " + ", ".join(f"{k} {n}" for k, n in sorted(Counter(got).items())))


if __name__ == "__main__":
    main()
