"""Health information in request text (pure): a medical term said about someone.

A question about a disease or a drug is not personal data ("what is the usual dose of
ibuprofen?"); the same term beside a person is ("my daughter was diagnosed with coeliac
disease", "Maria Santos, type 2 diabetes, metformin 1000 mg"). So a text carries health
information when it names a condition, a medicine, a dose or a clinical finding, and it also
names someone: in its own words (I, my, me, patient, Mr., Dr. ...), or through a person the
names detector found anywhere in the request (policies/entities.py decides that part).

The terms are common conditions, medicines, clinical tests and doses, in English; RE2 throughout,
so the scan stays linear in the text.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.re2text import compile_unicode, spans, to_bytes

_CONDITIONS = (
    "diabet(?:es|ic)|hypertension|asthma(?:tic)?|copd|emphysema|cancer|tumou?rs?|carcinoma|"
    "leuka?emia|lymphoma|melanoma|metasta(?:sis|tic)|chemotherapy|radiotherapy|"
    "depression|depressive|anxiety disorder|panic disorder|bipolar|schizophreni[ac]|psychosis|"
    "adhd|autism|autistic|dementia|alzheimer'?s|parkinson'?s|epilep(?:sy|tic)|seizures?|"
    "migraines?|stroke|heart attack|myocardial infarction|atrial fibrillation|heart failure|"
    "angina|arrhythmia|pneumonia|bronchitis|tuberculosis|hiv|aids|hepatitis [abc]|hepatitis|"
    "cirrhosis|kidney disease|renal failure|ckd|rheumatoid arthritis|osteoarthritis|arthritis|"
    "osteoporosis|lupus|multiple sclerosis|crohn'?s|ulcerative colitis|colitis|coeliac disease|"
    "celiac disease|psoriasis|eczema|anorexia|bulimia|eating disorder|hypothyroidism|"
    "hyperthyroidism|an(?:a)?emia|sickle cell|cystic fibrosis|sepsis|concussion|torn acl|"
    "fractured? [a-z]+|pregnan(?:t|cy)|gestational|miscarriage|infertility|ivf|chlamydia|"
    "gonorrh?o?ea|syphilis|herpes|hpv|std|sti|overdose|addiction|alcoholism|opioid use|"
    "substance use disorder|ptsd|ocd|insomnia|sleep apnoea|sleep apnea|glaucoma|cataracts?|"
    "hearing loss|chest pain|shortness of breath|allerg(?:y|ic) to|disabilit(?:y|ies)|"
    "covid(?:-19)?|long covid|exacerbation|relapsing|remission|terminal(?:ly)? ill"
)
_MEDICINES = (
    "metformin|insulin(?: glargine)?|warfarin|apixaban|rivaroxaban|clopidogrel|atorvastatin|"
    "simvastatin|rosuvastatin|statins?|lisinopril|ramipril|amlodipine|losartan|bisoprolol|"
    "metoprolol|propranolol|furosemide|levothyroxine|prednisolone|prednisone|salbutamol|"
    "albuterol|inhaler|sertraline|fluoxetine|citalopram|escitalopram|venlafaxine|mirtazapine|"
    "amitriptyline|lithium|quetiapine|olanzapine|risperidone|aripiprazole|methylphenidate|"
    "diazepam|lorazepam|alprazolam|zolpidem|gabapentin|pregabalin|tramadol|codeine|morphine|"
    "oxycodone|fentanyl|methadone|buprenorphine|naloxone|ibuprofen|paracetamol|acetaminophen|"
    "naproxen|omeprazole|lansoprazole|amoxicillin|penicillin|doxycycline|azithromycin|"
    "ciprofloxacin|levetiracetam|lamotrigine|valproate|carbamazepine|empagliflozin|"
    "dapagliflozin|semaglutide|ozempic|sitagliptin|methotrexate|adalimumab|tamoxifen|"
    "antidepressants?|antibiotics?|antiretrovirals?|dialysis"
)
_CLINICAL = (
    "diagnosed with|diagnosis of|prescribed|prescription for|hba1c|egfr|mri|ct scan|x-ray|"
    "biopsy|blood test results?|blood pressure of|discharge letter|triage|admitted with|"
    "discharged on|follow-up after|surgery|operated on|symptoms of [a-z]+ since"
)
_DOSE = r"\d+(?:[.,]\d+)? ?(?:mg|mcg|µg|ml|units|iu)"
_TERM = compile_unicode(
    rf"(?i)(?:^|[^\w])((?:{_CONDITIONS}|{_MEDICINES}|{_CLINICAL}|{_DOSE})(?:'s)?)(?:[^\w]|$)"
)
# Someone named in the text's own words: the writer, a patient, a titled person.
_SOMEONE = compile_unicode(
    r"(?:^|[^\w])(I|I'm|I've|I'd|(?i:my|me|mine|myself|patient|pt\.|mr\.?|mrs\.?|ms\.?|"
    r"dr\.?|son|daughter|wife|husband|mother|father|mum|mom|dad|grand(?:mother|father|ma|pa)|"
    r"child|baby|he's|she's|he has|she has|he takes|she takes|he is on|she is on))(?:[^\w]|$)"
)


def terms(data: bytes) -> Iterator[tuple[int, int]]:
    """Where medical terms are, in a text's UTF-8 bytes."""
    return spans(_TERM, data)


def names_someone(text: str) -> bool:
    """Whether the text speaks of someone in its own words (I, my, patient, Mrs. ...)."""
    return next(spans(_SOMEONE, to_bytes(text)), None) is not None
