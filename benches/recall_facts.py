"""The facts planted in the agent-session benchmark (SPEC §16.4) and the questions that ask
for them: constraints, to-dos, refusals with their evidence, and Chinese facts, twenty each.

Each question is worded differently from its fact: it shares only the key terms (a name, a
project, an order number, an object) and never the answer, so a hit means the search found
the turn from what a model would plausibly ask, not from a copy of the fact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Fact:
    kind: str  # "constraint" | "todo" | "refusal" | "chinese"
    text: str  # planted at the start of a user turn
    question: str  # the recall_history query that asks for it
    answer: str  # the part of the fact the question does not contain


_CONSTRAINTS = [
    # (key, fact, question, answer)
    (
        "Okonkwo",
        "Only charge Mr Okonkwo's Amex ending 4417, never his debit card.",
        "Which card may be used when Okonkwo pays?",
        "4417",
    ),
    (
        "Lindqvist",
        "Ms Lindqvist must always get an aisle seat; she has a knee brace.",
        "Seat preference for Lindqvist?",
        "aisle",
    ),
    (
        "Fairbanks",
        "Do not route anything for the Fairbanks account through Denver.",
        "Is there a city to avoid for Fairbanks?",
        "Denver",
    ),
    (
        "Szymanski",
        "Szymanski's luggage allowance stays at two checked bags, no upgrades.",
        "How many bags can Szymanski check?",
        "two",
    ),
    (
        "Marchetti",
        "Never email invoices to Marchetti; post them to the Via Roma office.",
        "How should invoices reach Marchetti?",
        "Via Roma",
    ),
    (
        "Hollowell",
        "Hollowell's meetings may only be booked after 2 pm Pacific.",
        "When can Hollowell meet?",
        "2 pm",
    ),
    (
        "Nakashima",
        "Nakashima requires vegetarian meals on every flight, confirmed in writing.",
        "Any meal requirement for Nakashima?",
        "vegetarian",
    ),
    (
        "Brightwater",
        "Keep the Brightwater budget under 12,500 euros in total.",
        "What is the spending cap on Brightwater?",
        "12,500",
    ),
    (
        "Abernathy",
        "Abernathy may not be contacted by phone; text messages only.",
        "Can I call Abernathy?",
        "text messages",
    ),
    (
        "Quarry",
        "All Quarry project files must stay on the encrypted drive QZ-704.",
        "Where must the Quarry files be kept?",
        "QZ-704",
    ),
    (
        "Delacroix",
        "Use the Lyon warehouse for every Delacroix shipment, not Marseille.",
        "Which warehouse ships for Delacroix?",
        "Lyon",
    ),
    (
        "Whitcombe",
        "Whitcombe's refunds go back to store credit, never to cash.",
        "How are Whitcombe refunds paid out?",
        "store credit",
    ),
    (
        "Ferreira",
        "Book Ferreira only on nonstop flights; connections are not acceptable.",
        "Can Ferreira take a connecting flight?",
        "nonstop",
    ),
    (
        "Pemberton",
        "Pemberton's reports must be written in British English.",
        "Which spelling should Pemberton reports use?",
        "British",
    ),
    (
        "Ivanova",
        "Ivanova's hotel must be within walking distance of the conference centre.",
        "Where should Ivanova stay?",
        "walking distance",
    ),
    (
        "Thornbury",
        "Thornbury data may not leave the EU region servers.",
        "Can the Thornbury data be hosted in the US?",
        "EU region",
    ),
    (
        "Castellano",
        "Castellano approves every purchase above 800 dollars personally.",
        "Who signs off large purchases, and from what amount, for Castellano?",
        "800",
    ),
    (
        "Rutherford",
        "Rutherford's deliveries need a signature from the front desk.",
        "What is needed when a parcel arrives for Rutherford?",
        "signature",
    ),
    (
        "Kowalczyk",
        "Kowalczyk travels with a service dog; every booking must note it.",
        "Anything special to note on Kowalczyk bookings?",
        "service dog",
    ),
    (
        "Montgomery",
        "For Montgomery, round every quote up to the next hundred.",
        "How should quotes for Montgomery be rounded?",
        "next hundred",
    ),
]

_TODOS = [
    (
        "Kestrel",
        "TODO: renew the Kestrel domain before the 14th of March.",
        "What is still pending for Kestrel?",
        "domain",
    ),
    (
        "Bluefin",
        "Remind me to send the Bluefin contract to legal on Monday.",
        "Did I leave a reminder about Bluefin?",
        "legal",
    ),
    (
        "Harrowgate",
        "To do: rotate the Harrowgate API keys after the audit.",
        "Harrowgate follow-up tasks?",
        "API keys",
    ),
    (
        "Saffron",
        "Next step for Saffron: book the venue for 120 guests.",
        "What remains to organise for Saffron?",
        "120 guests",
    ),
    (
        "Juniper",
        "Still need to migrate the Juniper mailing list to the new server.",
        "Open work items on Juniper?",
        "mailing list",
    ),
    (
        "Pelican",
        "Follow up with the Pelican supplier about the missing pallets.",
        "What did I want to chase up with Pelican?",
        "pallets",
    ),
    (
        "Cobalt",
        "Put the Cobalt quarterly review on the calendar for next Thursday.",
        "When is the Cobalt review meant to happen?",
        "Thursday",
    ),
    (
        "Tamarind",
        "Pending: order spare batteries for the Tamarind field sensors.",
        "What should be ordered for Tamarind?",
        "batteries",
    ),
    (
        "Meridian",
        "Ask Meridian's accountant for the 2024 tax statements.",
        "Which documents must I request for Meridian?",
        "tax statements",
    ),
    (
        "Osprey",
        "Later I must cancel the Osprey trial subscription before it bills.",
        "Is there something to stop on Osprey?",
        "trial subscription",
    ),
    (
        "Larkspur",
        "Reminder: Larkspur's passport photos need retaking.",
        "What needs redoing for Larkspur?",
        "passport photos",
    ),
    (
        "Granite",
        "Need to print 40 copies of the Granite handbook.",
        "How many Granite handbooks should be printed?",
        "40",
    ),
    (
        "Wildcat",
        "Schedule a dentist appointment after the Wildcat launch.",
        "What did I plan after Wildcat goes live?",
        "dentist",
    ),
    (
        "Ember",
        "TODO: water the Ember office plants every Friday.",
        "Recurring chores at Ember?",
        "plants",
    ),
    (
        "Sycamore",
        "Must file the Sycamore insurance claim, number PO-9302.",
        "Which claim do I have to file for Sycamore?",
        "PO-9302",
    ),
    (
        "Vantage",
        "Prepare slides on churn for the Vantage board.",
        "What topic are the Vantage board slides about?",
        "churn",
    ),
    (
        "Hazelnut",
        "Return the rented projector from the Hazelnut workshop.",
        "What equipment goes back after Hazelnut?",
        "projector",
    ),
    (
        "Orchid",
        "Update the Orchid price list with the new shipping rates.",
        "What must change in Orchid's pricing?",
        "shipping rates",
    ),
    (
        "Lantern",
        "Book a flight to Oslo for the Lantern kickoff.",
        "Travel needed for the Lantern kickoff?",
        "Oslo",
    ),
    (
        "Polaris",
        "Send thank-you notes to the Polaris volunteers.",
        "What do the Polaris volunteers get from me?",
        "thank-you notes",
    ),
]

_REFUSALS = [
    (
        "48213",
        "Refund for order 48213 refused: the receipt shows purchase on 2 January, "
        "outside the 30-day window.",
        "Why was 48213 not refunded?",
        "30-day window",
    ),
    (
        "51907",
        "I declined the upgrade on booking 51907 because the fare class is basic "
        "economy, which the policy excludes.",
        "What stopped the 51907 upgrade?",
        "basic economy",
    ),
    (
        "60344",
        "Cancellation of reservation 60344 rejected: the ticket is non-refundable and "
        "the trip already started.",
        "Reason 60344 could not be cancelled?",
        "non-refundable",
    ),
    (
        "72118",
        "Compensation for 72118 denied: the delay was 40 minutes, under the 3-hour threshold.",
        "Why no compensation on 72118?",
        "40 minutes",
    ),
    (
        "33590",
        "Address change for shipment 33590 refused because it has already left the depot.",
        "Could the address of 33590 be changed?",
        "left the depot",
    ),
    (
        "85021",
        "Exchange of item 85021 not allowed: the seal on the box was broken.",
        "What blocked the 85021 exchange?",
        "seal",
    ),
    (
        "19476",
        "Price match for 19476 rejected since the competitor listing was a marketplace seller.",
        "Why was 19476 not price matched?",
        "marketplace",
    ),
    (
        "26683",
        "Waiver of the 26683 change fee refused: the customer is not an elite member.",
        "Was the 26683 change fee waived?",
        "elite",
    ),
    (
        "90215",
        "Declined to add a passenger to 90215: the reservation is already at its "
        "5-passenger limit.",
        "Can 90215 take another traveller?",
        "5-passenger",
    ),
    (
        "44780",
        "Warranty claim 44780 refused: the serial number shows the unit is 4 years "
        "old, past the 2-year warranty.",
        "What did the serial show for 44780?",
        "4 years",
    ),
    (
        "57392",
        "Rebooking 57392 for free was refused; the schedule change was under 2 hours.",
        "Why was 57392 charged for rebooking?",
        "under 2 hours",
    ),
    (
        "63028",
        "Refund to a different card for 63028 refused: policy returns money to the "
        "original payment method only.",
        "Where can the 63028 refund go?",
        "original payment",
    ),
    (
        "70951",
        "Early check-in for 70951 declined, the room is occupied until noon.",
        "Could the 70951 guests arrive before the usual time?",
        "noon",
    ),
    (
        "12864",
        "Denied the loyalty points for 12864: the flight was booked through a travel agency.",
        "Why did 12864 earn no points?",
        "travel agency",
    ),
    (
        "38207",
        "Credit limit increase for account 38207 refused: two late payments in the last 6 months.",
        "What is holding back 38207's limit increase?",
        "late payments",
    ),
    (
        "49632",
        "Return of 49632 not accepted, the garment was worn and the tags removed.",
        "Why couldn't 49632 be returned?",
        "tags",
    ),
    (
        "58119",
        "Pet in cabin for 58119 refused: the carrier exceeds 22 kilograms.",
        "Can the pet fly in cabin on 58119?",
        "22 kilograms",
    ),
    (
        "67740",
        "Name change on ticket 67740 declined: tickets are non-transferable.",
        "Why can't 67740 be put in someone else's name?",
        "non-transferable",
    ),
    (
        "81355",
        "Overnight shipping for 81355 refused; the address is a PO box.",
        "What prevented express delivery of 81355?",
        "PO box",
    ),
    (
        "95208",
        "Discount code on 95208 rejected: it expired on 31 October.",
        "Why didn't the code work on 95208?",
        "31 October",
    ),
]

_CHINESE = [
    ("护照", "我的护照放在3号储物柜，密码是5100。", "护照 储物柜 密码是多少", "5100"),
    ("身份证", "身份证在书房第二个抽屉里的红色信封中。", "身份证放在哪里了", "红色信封"),
    ("备用钥匙", "备用钥匙交给了楼下的王阿姨保管。", "备用钥匙在谁那里", "王阿姨"),
    ("租房合同", "租房合同每年八月续签，房东姓陈。", "租房合同什么时候续签", "八月"),
    ("体检报告", "体检报告显示血压偏高，医生建议少吃盐。", "医生对体检报告怎么说", "少吃盐"),
    ("保险单", "汽车保险单的保单号是PA-2291，十二月到期。", "汽车保险单号码和到期时间", "PA-2291"),
    ("结婚证", "结婚证原件锁在卧室的保险箱里。", "结婚证原件在哪", "保险箱"),
    ("银行卡", "工资银行卡绑定的是招商银行尾号8826。", "工资银行卡是哪家的", "8826"),
    ("驾驶证", "驾驶证明年五月需要换证，记得带照片。", "驾驶证什么时候换", "五月"),
    ("户口本", "户口本借给了表哥办手续，下周归还。", "户口本现在在谁手上", "表哥"),
    ("毕业证书", "毕业证书扫描件存在网盘的档案文件夹。", "毕业证书扫描件存在哪", "网盘"),
    ("房产证", "房产证还在银行抵押，贷款还清后才能取回。", "房产证什么时候能拿回来", "抵押"),
    ("医保卡", "妈妈的医保卡密码是她生日的后六位。", "妈妈医保卡的密码", "生日"),
    ("充电器", "笔记本充电器忘在了公司会议室。", "笔记本充电器丢在哪里", "会议室"),
    ("公司印章", "公司印章由财务部李经理保管，用章要提前申请。", "公司印章找谁", "李经理"),
    ("旧硬盘", "旧硬盘里有2019年的照片，不要格式化。", "旧硬盘能不能格式化", "2019"),
    ("猫粮", "猫粮只买无谷配方，小橘对鸡肉过敏。", "猫粮有什么要求", "鸡肉过敏"),
    ("相机电池", "相机电池放在电视柜左边的收纳盒里。", "相机电池放哪儿了", "收纳盒"),
    ("签证材料", "签证材料还缺一份在职证明，周五前交给领事馆。", "签证材料还缺什么", "在职证明"),
    ("发票原件", "报销用的发票原件已经寄给了深圳分公司。", "发票原件寄到哪里", "深圳"),
]


def _build() -> list[Fact]:
    facts: list[Fact] = []
    for kind, rows in (
        ("constraint", _CONSTRAINTS),
        ("todo", _TODOS),
        ("refusal", _REFUSALS),
        ("chinese", _CHINESE),
    ):
        for key, text, question, answer in rows:
            assert key in text and key in question, (kind, key)
            assert answer in text and answer not in question, (kind, key)
            facts.append(Fact(kind, text, question, answer))
    # Interleave the kinds, so that every part of the session holds every kind.
    return [facts[i + 20 * k] for i in range(20) for k in range(4)]


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


FACTS: list[Fact] = _build()
assert len(FACTS) == 80
assert len({fact.text for fact in FACTS}) == 80
# Worded differently: no question repeats most of its fact's words (CJK text has no spaces,
# so the check is on characters there).
for _fact in FACTS:
    if _fact.kind == "chinese":
        assert _fact.question not in _fact.text
    else:
        shared = _words(_fact.question) & _words(_fact.text)
        assert len(shared) <= len(_words(_fact.question)) // 2 + 1, _fact.question
