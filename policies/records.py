"""Numbers that stand for a person in someone's records, known by the label before them, in
some thirty languages (pure): a patient's record or episode ("NHC: 2843742", "MRN 00412877",
"Fallnummer: 7734120", "カルテ番号：558812"), an insurance, member, customer, account,
employee or student number, a driving licence, a vehicle's plate ("Kennzeichen: B-MW 1234",
"차량번호 12가3456").

Such a number has no shape of its own (every hospital and shop writes its own), but its label
says whose it is. An order, invoice, parcel or product number identifies a purchase, not a
person: their labels are not here, and they pass. The value must hold at least three digits;
its groups may be parted by a space, dot, slash or hyphen ("28 12345678 90", "AB 123 CD").
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.labelled import SEPARATOR_OR_SPACE, labelled
from policies.re2text import spans

_LABELS = (
    # English
    "patient id", "patient number", "patient no", "medical record number", "medical record no",
    "mrn", "record number", "chart number", "case number", "nhs number", "nhs no",
    "health card number", "insurance number", "insurance id", "member id", "member number",
    "membership number", "policy number", "customer number", "customer id", "client number",
    "client id", "account number", "account no", "employee id", "employee number", "staff id",
    "staff number", "student id", "student number", "badge number", "driver's license number",
    "driver's licence number", "driving licence number", "license number", "licence number",
    "license plate", "licence plate", "number plate", "plate number",
    # Spanish, Portuguese, Italian, French
    "nhc", "historia clínica", "número de historia", "cip", "cipa", "nass", "episodio",
    "número de afiliación", "número de paciente", "número de cliente", "número de socio",
    "número de póliza", "número de cuenta", "matrícula", "carné de conducir",
    "licencia de conducir", "permiso de conducir", "placa", "prontuário", "cartão sus",
    "número do paciente", "número do cliente", "cnh", "cartella clinica", "tessera sanitaria",
    "numero paziente", "numero cliente", "matricola", "targa", "numero patente",
    "numéro de patient", "numéro de dossier", "n° de dossier", "numéro de sécurité sociale",
    "numéro client", "numéro d'adhérent", "numéro de police", "numéro de compte", "matricule",
    "numéro de permis", "immatriculation", "plaque d'immatriculation",
    # Germanic, Nordic, Finnish
    "patientennummer", "patienten-id", "fallnummer", "versichertennummer",
    "krankenversicherungsnummer", "versicherungsnummer", "kundennummer", "mitgliedsnummer",
    "personalnummer", "matrikelnummer", "kontonummer", "führerscheinnummer", "kennzeichen",
    "aktenzeichen", "patiëntnummer", "dossiernummer", "klantnummer", "lidnummer",
    "personeelsnummer", "studentnummer", "kenteken", "rijbewijsnummer", "patientnummer",
    "journalnummer", "kundnummer", "kundenummer", "medlemsnummer", "registreringsnummer",
    "asiakasnumero", "rekisterinumero", "henkilöstönumero",
    # Slavic, Greek, Turkish, Hungarian
    "numer pacjenta", "numer klienta", "numer rejestracyjny", "numer legitymacji",
    "číslo pojištěnce", "číslo pacienta", "номер пациента", "номер карты", "номер полиса",
    "полис", "номер клиента", "табельный номер", "госномер", "номер водительского удостоверения",
    "αριθμός μητρώου", "αριθμός ασθενούς", "hasta no", "müşteri no", "plaka", "ehliyet no",
    "sicil no", "betegazonosító", "ügyfélszám", "rendszám",
    # Semitic, Indic
    "رقم المريض", "رقم الملف", "رقم العميل", "رقم اللوحة", "מספר תיק", "מספר לקוח",
    "मरीज संख्या", "ग्राहक संख्या",
    # CJK
    "患者番号", "診察券番号", "カルテ番号", "保険証番号", "会員番号", "顧客番号", "社員番号",
    "学籍番号", "免許証番号", "病历号", "病歷號", "住院号", "医保卡号", "会员号", "客户号",
    "工号", "学号", "车牌号", "驾驶证号", "환자번호", "등록번호", "회원번호", "고객번호",
    "사번", "학번", "차량번호", "운전면허번호",
    # a vehicle's plate, in more languages
    "ナンバー", "ナンバープレート", "車両番号", "車牌", "車牌號碼", "车牌", "车牌号码", "차량 번호",
    "번호판", "номерной знак", "номерний знак", "регистрационный номер", "πινακίδα",
    "αριθμός κυκλοφορίας", "plat nomor", "pelat nomor", "biển số", "biển số xe", "ทะเบียนรถ",
    "پلاک", "پلاک خودرو", "מספר רכב", "वाहन नंबर", "वाहन संख्या", "spz", "registrační značka",
    "evidenční číslo", "nummerplade", "nummerskilt", "reg.nr", "rekisteritunnus",
    "nr rejestracyjny", "vehicle registration", "vrm",
    # a clinician's licence to practise (º is o once text is normalised, NFKC)
    "nºcol", "nº col", "nocol", "nº colegiado", "no colegiado", "número de colegiado",
    "numero de colegiado", "colegiado nº", "colegiado no", "gmc number", "npi", "npi number",
    "dea number", "rpps", "adeli", "lanr", "big-nummer",
)  # fmt: skip
# Groups of letters and digits, each with a digit or of at most three capitals ("B-MW 1234")
# or letters of a script without case ("神戸 82 め 65-44", "辽H-92305"), parted by one space,
# dot, slash or hyphen.
_GROUP = r"(?:[\w]*\d[\w]*|\p{Lu}{1,3}|\p{Lo}{1,3})"
_VALUE = rf"{_GROUP}(?:[ ./\-]{_GROUP}){{0,4}}"
_RECORD = labelled(_LABELS, f"(?-i:{_VALUE})", SEPARATOR_OR_SPACE)
_LEAST_DIGITS = 3


def record_numbers(data: bytes) -> Iterator[tuple[int, int]]:
    """Where labelled record numbers are in `data` (UTF-8)."""
    for start, end in spans(_RECORD, data):
        if sum(byte in _DIGITS for byte in data[start:end]) >= _LEAST_DIGITS:
            yield start, end


_DIGITS = frozenset(b"0123456789")
