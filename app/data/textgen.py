"""Made-up but varied text in several languages (Cyrillic included), for the data benchmark
and the tests: deterministic in its seed, no download, no copyrighted text."""

from __future__ import annotations

import random

WORDS = {
    "ru": ("кот пёс лиса звезда река город дом окно поле ветер снег лес море книга учёный машина "
           "видит любит ищет строит читает пишет считает находит тихо быстро вчера завтра "
           "большой маленький красный старый новый тёплый холодный весёлый").split(),
    "uk": ("кіт пес лисиця зоря річка місто хата вікно поле вітер сніг ліс море книжка бачить "
           "любить шукає будує читає пише швидко вчора завтра великий малий новий").split(),
    "en": ("cat dog fox star river city house window field wind snow forest sea book scientist "
           "machine sees loves finds builds reads writes counts quietly quickly yesterday "
           "tomorrow big small red old new warm cold cheerful").split(),
    "de": ("Katze Hund Fuchs Stern Fluss Stadt Haus Fenster Feld Wind Schnee Wald Meer Buch "
           "sieht liebt sucht baut liest schreibt schnell gestern morgen groß klein neu alt").split(),
    "el": ("γάτα σκύλος αλεπού αστέρι ποτάμι πόλη σπίτι παράθυρο χωράφι άνεμος χιόνι δάσος "
           "θάλασσα βιβλίο βλέπει αγαπά ψάχνει χτίζει διαβάζει γράφει γρήγορα χθες αύριο").split(),
    "zh": list("猫狗狐狸星河城市房子窗户田野风雪森林海书看见喜欢寻找建造阅读写快慢昨天明天大小新旧"),
}


def sentence(rng: random.Random, lang: str) -> str:
    words = WORDS[lang]
    n = rng.randint(4, 12)
    sep = "" if lang == "zh" else " "
    body = sep.join(rng.choice(words) for _ in range(n))
    end = "。" if lang == "zh" else rng.choice(".!?.")
    return body[:1].upper() + body[1:] + end


def paragraph(rng: random.Random, lang: str) -> str:
    sep = "" if lang == "zh" else " "
    return sep.join(sentence(rng, lang) for _ in range(rng.randint(2, 6)))


def document(rng: random.Random, lang: str | None = None, paragraphs: int | None = None) -> str:
    lang = lang or rng.choice(list(WORDS))
    n = paragraphs if paragraphs is not None else rng.randint(1, 8)
    title = sentence(rng, lang).rstrip(".!?。")
    return f"# {title}\n\n" + "\n\n".join(paragraph(rng, lang) for _ in range(n)) + "\n"


def documents(count: int, seed: int = 0, lang: str | None = None) -> list[str]:
    rng = random.Random(seed)
    return [document(rng, lang) for _ in range(count)]
